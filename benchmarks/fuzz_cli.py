"""A fuzz round over every command: hostile values, odd locales and terminals, a closed stdout.

    python benchmarks/fuzz_cli.py [--in-process N] [--subprocess M] [--seed S]

Most invocations run in this process through Typer's CliRunner (no interpreter start, no torch import
each); the ones that need a real process (an encoding, ``$COLUMNS``, ``$LINES``, ``TERM``, a closed
stdout, no stdin) run as subprocesses. Each must end with exit 0, 1 or 2, no traceback, no "internal
error", within 60 s; a usage error (an ``error:`` line that points at ``--help``) must exit 2. Prints
one line per failure and a summary; exits 1 if anything failed. The default suite runs a fast sample
of the same checks (tests/cli/test_fuzz.py, tests/cli/test_terminal.py).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 60

HOSTILE = ["", " ", "-", "--", "0", "-1", "1e308", "nan", "inf", "é", "\u200b", "../..", "9" * 40, str(2**64),
           "B=2,T=6", "B=0", "H=7", "x" * 300, "☃", "view(6)", "transpose(0,0)", "1GiB", "-0", "0x10", "1_000"]
EXERCISES = ["split-heads", "merge-heads", "nope", "", "../x"]
BAD_PORTS = ["-1", "65536", "70000", "x", "", "1e308", str(2**64)]


def _files(d: Path) -> dict[str, str]:
    (d / "folder").mkdir()
    (d / "nonutf8.txt").write_bytes(b"\xff\xfe\x00\n")
    (d / "mine.py").write_text("import torch\nx = torch.randn(2, 6, 512)  # (B, T, D)\n"
                               "q = x.view(2, 6, 8, 64).transpose(1, 2)  # (B, H, T, d_k)\n")
    (d / "ki.py").write_text("import torch\nx = torch.randn(2, 6)\ny = x.view(3, 4)\nraise KeyboardInterrupt\n")
    (d / "exit.py").write_text("import os, torch\nx = torch.randn(2, 6)\ny = x.view(3, 4)\nos._exit(7)\n")
    (d / "closes.py").write_text("import sys, torch\nx = torch.randn(2, 6)\ny = x.view(3, 4)\nsys.stdout.close()\n")
    return {name: str(d / name) for name in ("folder", "nonutf8.txt", "mine.py", "ki.py", "exit.py", "closes.py")}


def _value(rng: random.Random, files: dict[str, str]) -> str:
    pool = HOSTILE + [f for name, f in files.items() if name != "closes.py"] + ["/dev/zero", "/dev/null",
                                                                                 "/nonexistent/x"]
    return rng.choice(pool) if rng.random() < 0.8 else str(rng.randint(-5, 80))


def _command(rng: random.Random, files: dict[str, str], ws: str) -> list[str]:
    v = lambda: _value(rng, files)  # noqa: E731
    run_opts = ["--d-model", "--heads", "--batch", "--seq-len", "--seed", "--kv-len", "--kv-heads", "--width",
                "--max-memory", "--explain", "--theme", "--device", "--impl", "--mask", "--pad", "--pad-side",
                "--break", "--preset", "--dropout", "--answers", "--export"]
    flags = ["--causal", "--compact", "--all", "--json", "--force", "--train", "--long-names", "--diagrams"]
    kind = rng.choice(["run", "run", "strides", "trace", "trace", "lessons", "lesson", "quiz", "compare",
                       "exercise", "exercise", "live", "watch", "bare"])
    if kind == "run":
        args = ["run", "--d-model", "64", "--heads", "4", "--seq-len", "4"]
        for _ in range(rng.randint(0, 2)):
            args += [rng.choice(run_opts), v()] if rng.random() < 0.7 else [rng.choice(flags)]
        return args
    if kind == "strides":
        return ["strides", rng.choice(["6", "2,3,4", v()]), rng.choice(["view(6)", "transpose(1,2)", v()]),
                *rng.choice([[], ["--dims", v()], ["--width", v()], ["--rows", v()]])]
    if kind == "trace":
        # (closes.py closes sys.stdout: in this process that is the runner's buffer, so it runs as a subprocess)
        script = rng.choice([files["mine.py"], files["ki.py"], files["exit.py"], v()])
        return ["trace", script, *rng.choice([[], ["--dims", v()], ["--only", v()], ["--width", v()],
                                              ["--max-ops", v()], ["--time-limit", v()], ["--json"], ["--all"]])]
    if kind == "lesson":
        return ["lesson", rng.choice(["1", "3", "12", "0", "99", v()]),
                *rng.choice([[], ["--width", v()], ["--all"], ["--all", "--present"], ["--no-run"]])]
    if kind == "live":
        # a valid `live` is a server that runs until Ctrl-C (tested in tests/live): each call here has one
        # value live refuses, among hostile others, so it must answer at once with a usage error
        options = [["--port", rng.choice(BAD_PORTS)], ["--lesson", rng.choice(["0", "99", "-1", "x"])],
                   ["--count", rng.choice(["0", "201", "-5", "x"])], ["--csv", rng.choice(["/nonexistent/x", "/"])]]
        extra = [rng.choice(["--host", "--heads", "--seq-len", "--impl", "--break", "--preset"]), v()]
        return ["live", *rng.choice(options), *(extra if rng.random() < 0.6 else [])]
    if kind in ("lessons", "quiz", "compare"):
        return [kind, *rng.choice([[], ["--width", v()], ["--count", v()], ["--seed", v()], ["--heads", v()]])]
    if kind == "exercise":
        sub = rng.choice(["list", "hint", "solution", "check", "start", "reset", "grade"])
        ex = rng.choice(EXERCISES)
        if sub == "list":
            return ["exercise", "list", "--workspace", rng.choice([ws, v()])]
        if sub == "grade":
            return ["exercise", "grade", rng.choice([ws, v()]), *rng.choice([[], ["--exercise", ex]])]
        extra = rng.choice([[], ["--time-limit", v()], ["--all"]]) if sub == "check" else []
        return ["exercise", sub, ex, "--workspace", ws, *extra]
    if kind == "watch":   # (watch waits for saves until q: only the calls it must refuse at once)
        return ["exercise", "watch", rng.choice(["nope", "", "../x"]), "--workspace", ws, *rng.choice([[], ["--all"]])]
    return rng.choice([[], ["--nope"], ["nope"], ["--version"], ["-h"], ["--help"], [v()]])


def _command_or_help(rng: random.Random, files: dict[str, str], ws: str) -> list[str]:
    """A drawn command; one in twenty asks for its ``--help`` instead (every subcommand's help too)."""
    args = _command(rng, files, ws)
    words = 2 if args[:1] == ["exercise"] else 1   # the subcommand's own words
    return [*args[:words], "--help"] if args and rng.random() < 0.05 else args


def _bad(code: int, output: str, seconds: float) -> str | None:
    if seconds > LIMIT_S:
        return f"ran {seconds:.0f} s"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if "Traceback" in output:
        return "traceback"
    if "internal error" in output:
        return "internal error"
    if "error:" in output and "--help)" in output.split("error:", 1)[1].split("\n", 1)[0] and code != 2:
        return f"usage error with exit {code}"
    return None


def in_process(args: list[str]) -> tuple[int, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import cli_in_process

    proc = cli_in_process(*args, input="")
    return proc.returncode, proc.stdout + proc.stderr


ENVIRONMENTS = [
    ({"PYTHONIOENCODING": "ascii"}, ""), ({"PYTHONIOENCODING": "latin-1"}, ""), ({"LANG": "C", "LC_ALL": "C"}, ""),
    ({"COLUMNS": "100000"}, ""), ({"COLUMNS": "0"}, ""), ({"COLUMNS": "abc"}, ""), ({"LINES": "999999999"}, ""),
    ({"TERM": "dumb"}, ""), ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, ""), ({}, ">&-"), ({}, "2>&-"), ({}, "<&-"),
]


def subprocess_run(args: list[str], env: dict[str, str], redirect: str) -> tuple[int, str, float]:
    import shlex

    line = f"{shlex.quote(sys.executable)} -m shapetrace {' '.join(map(shlex.quote, args))} {redirect}"
    start = time.monotonic()
    try:
        proc = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=LIMIT_S + 30,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **env}, errors="replace")
    except subprocess.TimeoutExpired:
        return 124, "", time.monotonic() - start
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-process", type=int, default=1000)
    parser.add_argument("--subprocess", type=int, default=60)
    parser.add_argument("--seed", type=int, default=35)
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    failures, codes, slowest = [], {0: 0, 1: 0, 2: 0}, (0.0, [])
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files, ws = _files(d), str(d / "ws")
        os.environ["SHAPETRACE_STATE_DIR"] = str(d / "state")
        os.chdir(d)
        for i in range(opts.in_process):
            args = _command_or_help(rng, files, ws)
            start = time.monotonic()
            code, output = in_process(args)
            seconds = time.monotonic() - start
            slowest = max(slowest, (seconds, args))
            codes[code] = codes.get(code, 0) + 1
            if (why := _bad(code, output, seconds)) is not None:
                failures.append((why, args, {}, output[-400:]))
                print(f"FAIL {why}: shapetrace {' '.join(args)}\n    {output[-400:]!r}", flush=True)
            if (i + 1) % 50 == 0:
                print(f"{i + 1} in-process invocations, {len(failures)} failures", flush=True)
        for i in range(opts.subprocess):
            env, redirect = ENVIRONMENTS[i % len(ENVIRONMENTS)]
            args = _command_or_help(rng, files, ws) if i >= len(ENVIRONMENTS) else rng.choice(
                [["lessons"], ["exercise", "list", "--workspace", ws], ["quiz", "--count", "1"], ["lesson", "1"],
                 ["run"], ["lesson", "12"], ["trace", files["mine.py"]], ["trace", files["closes.py"]]])
            code, output, seconds = subprocess_run(args, env, redirect)
            slowest = max(slowest, (seconds, args))
            codes[code] = codes.get(code, 0) + 1
            if (why := _bad(code, output, seconds)) is not None:
                failures.append((why, args, env | ({"redirect": redirect} if redirect else {}), output[-400:]))
    for why, args, env, tail in failures:
        print(f"FAIL {why}: {env} shapetrace {' '.join(args)}\n    {tail!r}")
    total = opts.in_process + opts.subprocess
    print(f"{total} invocations ({opts.in_process} in-process, {opts.subprocess} subprocesses): "
          f"{len(failures)} failures; exit codes {codes}; slowest {slowest[0]:.1f} s: {slowest[1]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
