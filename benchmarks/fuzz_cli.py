"""A fuzz round over every command: hostile values, hostile scripts, odd locales and terminals, closed streams.

    python benchmarks/fuzz_cli.py [--forked N] [--subprocess M] [--jobs 2] [--seed S] [--log FILE]

Each invocation is a process of its own, with a 60 s cap, at most ``--jobs`` at once. Most are forked
from a zygote that imported torch and shapetrace once (tests/zygote.py: no interpreter start, no torch
import each); a fork keeps the zygote's encoding, so what only an interpreter's start can set (an
encoding, a locale, a closed stdout, a pipe closed early by ``| head -1``) runs as a real subprocess
through the shell. Each must end with exit 0, 1 or 2, no traceback, no "internal error", within 60 s;
a usage error exits 2 with one ``error:`` line; a failed run exits 1. Prints one line per failure, a
table of invocations and failures per subcommand, and exits 1 if anything failed. The default suite
runs a fast sample of the same checks (tests/cli/test_fuzz.py, tests/cli/test_terminal.py).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 60
#: what each line flood.py prints ends with
FLOOD_MARK = "☃" * 10
#: how long a watch with stdin closed runs before its Ctrl-C
WATCH_S = 10

HOSTILE = ["", " ", "-", "--", "0", "-1", "1e308", "nan", "inf", "-inf", "é", "\u200b", "../..", "9" * 40,
           str(2**64), "B=2,T=6", "B=0", "H=7", "x" * 300, "☃", "view(6)", "transpose(0,0)", "1GiB", "-0", "0x10",
           "1_000", "\x1b[31m", "İ", "ı", "%s%n", "$(echo x)", "a\nb", "1,2,", ",", "B=2,B=3", "T=-4", "d_k=0"]
EXERCISES = ["split-heads", "merge-heads", "head-dim", "nope", "", "../x", "SPLIT-HEADS"]
BAD_PORTS = ["-1", "65536", "70000", "x", "", "1e308", str(2**64)]

#: Scripts for ``trace``: each a way a user's code can end badly, after one view so there is a row.
SCRIPTS = {
    "mine.py": "x = torch.randn(2, 6, 512)  # (B, T, D)\nq = x.view(2, 6, 8, 64).transpose(1, 2)  # (B, H, T, d_k)\n",
    "raises.py": "y = x.view(3, 4)\nraise ValueError('bad thing')\n",
    "exit3.py": "y = x.view(3, 4)\nsys.exit(3)\n",
    "exitnone.py": "y = x.view(3, 4)\nraise SystemExit(None)\n",
    "exitstr.py": "y = x.view(3, 4)\nsys.exit('bye, ☃')\n",
    "osexit.py": "y = x.view(3, 4)\nos._exit(7)\n",
    "ki.py": "y = x.view(3, 4)\nraise KeyboardInterrupt\n",
    "loop.py": "while True:\n    y = x.view(3, 4).transpose(0, 1)\n",
    "sleep.py": "y = x.view(3, 4)\nimport time\ntime.sleep(3600)\n",
    "flood.py": "for i in range(200000):\n    print('line', i, '☃' * 10)\ny = x.view(3, 4)\n",
    "recursion.py": "def f(n):\n    return f(n + 1) if n % 1000 else f(n + 1).view(-1)\ny = x.view(3, 4)\nf(1)\n",
    "closes.py": "y = x.view(3, 4)\nsys.stdout.close()\n",
    "closesfd.py": "y = x.view(3, 4)\nos.close(1)\nos.close(2)\n",
    "threads.py": ("import threading\ndef work():\n    for _ in range(50):\n        x.view(3, 4).t().contiguous()\n"
                   "ts = [threading.Thread(target=work) for _ in range(4)]\n[t.start() for t in ts]\n"
                   "[t.join() for t in ts]\ny = x.view(3, 4)\n"),
    "daemon.py": ("import threading, time\ndef spin():\n    while True:\n        x.view(3, 4)\n"
                  "threading.Thread(target=spin, daemon=True).start()\ntime.sleep(0.2)\ny = x.view(3, 4)\n"),
    "stdin.py": "y = x.view(3, 4)\nprint(input())\n",
    "badview.py": "y = x.view(5, 5)\n",
    "nan.py": "y = (x / 0 * 0).view(3, 4)\n",
    "huge.py": "z = torch.empty(2**20, 2**20, device='meta').view(2**10, -1)\n",
    "patches.py": "torch.Tensor.view = lambda *a, **k: 1/0\ny = x.view(3, 4)\n",
    "syntax.py": None, "empty.py": None, "binary.py": None,
}
HEADER = "import os, sys, torch\nx = torch.randn(2, 6)\n"


def _files(d: Path) -> dict[str, str]:
    (d / "folder").mkdir()
    (d / "nonutf8.txt").write_bytes(b"\xff\xfe\x00\n")
    for name, body in SCRIPTS.items():
        if body is not None:
            (d / name).write_text(body if name == "mine.py" else HEADER + body, encoding="utf-8")
            if name == "mine.py":
                (d / name).write_text("import torch\n" + body)
    (d / "syntax.py").write_text("import torch\nx = torch.randn(2,\n")
    (d / "empty.py").write_text("")
    (d / "binary.py").write_bytes(bytes(random.Random(1).randrange(256) for _ in range(4096)))
    (d / "unreadable.py").write_text("import torch\n")
    os.chmod(d / "unreadable.py", 0)   # (as root it is read anyway)
    os.mkfifo(d / "fifo.py")
    os.symlink(d / "loop1", d / "loop2")
    os.symlink(d / "loop2", d / "loop1")
    files = {name: str(d / name) for name in SCRIPTS}
    files.update({name: str(d / name) for name in ("folder", "nonutf8.txt", "unreadable.py", "fifo.py", "loop1")})
    return files


def _paths(files: dict[str, str]) -> list[str]:
    return [files[k] for k in ("folder", "nonutf8.txt", "unreadable.py", "fifo.py", "loop1", "binary.py",
                               "empty.py")] + ["/dev/zero", "/dev/null", "/nonexistent/x", "/", "out.html",
                                               "out.svg", "out.md", "out.pdf", "folder/new.html"]


class Draw:
    """Random commands over every subcommand and option."""

    RUN_VALUES = ["--d-model", "--heads", "--batch", "--seq-len", "--seed", "--kv-len", "--kv-heads", "--width",
                  "--max-memory", "--explain", "--theme", "--device", "--impl", "--mask", "--pad", "--pad-side",
                  "--break", "--preset", "--dropout", "--decode", "--image", "--patch", "--channels", "--diagram",
                  "--ops", "--auto"]
    RUN_FLAGS = ["--causal", "--compact", "--all", "--json", "--force", "--train", "--long-names", "--diagrams",
                 "--safe-softmax", "--backward", "--static", "--step", "--predict"]
    GOOD = {"--impl": ["manual", "einops", "fused-qkv", "sdpa", "torch"], "--break": ["list", "no-transpose"],
            "--preset": ["gpt2", "llama3-8b", "bert-base"], "--device": ["cpu", "meta", "auto", "cuda"],
            "--mask": ["padding", "none"], "--pad": ["0,2", "1,1"], "--explain": ["brief", "full"],
            "--theme": ["dark", "light"], "--decode": ["2", "65"], "--image": ["32"], "--patch": ["8", "5"],
            "--kv-heads": ["1", "2", "3"], "--ops": ["1-3", "9-12", "5-2"]}

    def __init__(self, rng: random.Random, files: dict[str, str], ws: str):
        self.rng, self.files, self.ws = rng, files, ws

    def value(self, option: str = "") -> str:
        r = self.rng.random()
        if option in self.GOOD and r < 0.4:
            return self.rng.choice(self.GOOD[option])
        if r < 0.55:
            return str(self.rng.randint(-5, 80))
        if r < 0.8:
            return self.rng.choice(HOSTILE)
        return self.rng.choice(_paths(self.files))

    def options(self, values: list[str], flags: list[str], most: int = 3) -> list[str]:
        out: list[str] = []
        for _ in range(self.rng.randint(0, most)):
            if self.rng.random() < 0.7:
                option = self.rng.choice(values)
                out += [option, self.value(option)]
            else:
                out.append(self.rng.choice(flags))
        return out

    def run(self) -> tuple[list[str], str]:
        base = ["run", "--d-model", "64", "--heads", "4", "--seq-len", "4"] if self.rng.random() < 0.8 else ["run"]
        args = base + self.options(self.RUN_VALUES, self.RUN_FLAGS)
        stdin = self.rng.choice(["", "\n" * 30, "d\nb\ne\ng 3\nq\n", "[B, H, T, d_k]\n" * 20, "x\n" * 40, "é☃\n"])
        return args, stdin

    def strides(self) -> tuple[list[str], str]:
        shape = self.rng.choice(["6", "2,3,4", "2,6,512", "0", "1,1", self.value()])
        chain = self.rng.choice(["view(6)", "transpose(1,2)", "view(2,12).t().contiguous()", "expand(4,6)",
                                 "permute(2,0,1)", "view(-1)", "unfold(0,2,1)", self.value()])
        extra = self.options(["--dims", "--heads", "--rows", "--width"], ["--json", "--no-diagrams"], 2)
        return ["strides", shape, chain, *extra], ""

    def trace(self) -> tuple[list[str], str]:
        script = self.rng.choice(list(self.files.values())[: len(SCRIPTS)] + _paths(self.files))
        if script.endswith(("closes.py", "closesfd.py")):
            script = self.files["mine.py"]   # (they close the forked child's pipes: run as subprocesses below)
        values = ["--dims", "--only", "--layer", "--loss", "--include", "--exclude", "--width", "--device",
                  "--max-memory", "--max-ops", "--time-limit", "--export", "--theme", "--auto"]
        flags = ["--json", "--all", "--summary", "--backward", "--force", "--static", "--step"]
        extra = self.options(values, flags, 2)
        if script.endswith(("loop.py", "sleep.py", "daemon.py")) and "--time-limit" not in extra:
            extra += ["--time-limit", self.rng.choice(["0.5", "1", "2"])]
        return ["trace", script, *extra], self.rng.choice(["", "hello\n", "q\n"])

    def lesson(self) -> tuple[list[str], str]:
        n = self.rng.choice(["1", "3", "9", "11", "12", "13", "0", "99", "-1", "1.5", self.value()])
        extra = self.options(["--width", "--auto", "--export", "--theme", "--workspace", "--state-dir"],
                             ["--all", "--present", "--no-run", "--run", "--force"], 2)
        return ["lesson", n, *extra], self.rng.choice(["", "\n" * 40, "b\nb\nq\n"])

    def quiz(self) -> tuple[list[str], str]:
        extra = self.options(["--topic", "--count", "--answers-from", "--seed", "--width", "--state-dir"],
                             ["--topics", "--all"], 3)
        return ["quiz", *extra], self.rng.choice(["", "view\n" * 10, "[2, 3]\ny\n" * 10, "\n" * 20, "é\n"])

    def compare(self) -> tuple[list[str], str]:
        values = ["--d-model", "--heads", "--batch", "--seq-len", "--seed", "--mask", "--pad", "--kv-len",
                  "--kv-heads", "--impls", "--width", "--device"]
        extra = self.options(values, ["--causal", "--backward", "--json"], 2)
        if self.rng.random() < 0.3:
            extra += ["--diff", self.rng.choice(["manual", "sdpa", "x"]), self.rng.choice(["einops", "torch", ""])]
        return ["compare", "--d-model", "32", "--heads", "4", "--seq-len", "4", *extra], ""

    def lessons(self) -> tuple[list[str], str]:
        return ["lessons", *self.options(["--workspace", "--width", "--state-dir"], ["--json"], 2)], ""

    def live(self) -> tuple[list[str], str]:
        # a valid `live` serves until Ctrl-C (tested in tests/live): each call has one value live refuses
        refused = self.rng.choice([["--port", self.rng.choice(BAD_PORTS)],
                                   ["--lesson", self.rng.choice(["0", "99", "-1", "x"])],
                                   ["--count", self.rng.choice(["0", "201", "-5", "x"])],
                                   ["--csv", self.rng.choice(["/nonexistent/x", "/", self.files["folder"]])],
                                   ["--host", self.rng.choice(["999.1.1.1", "x" * 300, "no such host"])]])
        extra = self.options(["--heads", "--seq-len", "--impl", "--break", "--preset", "--topic"], ["--quiz"], 1)
        return ["live", *refused, *extra], ""

    def exercise(self) -> tuple[list[str], str]:
        sub = self.rng.choice(["list", "hint", "solution", "check", "start", "reset", "grade", "watch", "nope"])
        ex = self.rng.choice(EXERCISES)
        ws = ["--workspace", self.rng.choice([self.ws, self.ws, self.value()])]
        if sub == "list":
            return ["exercise", "list", *ws, *self.options(["--width"], ["--json"], 1)], ""
        if sub == "grade":
            sub_dir = self.rng.choice([self.ws, self.files["folder"], self.value()])
            extra = self.options(["--exercises", "--gradebook", "--csv", "--json-file", "--workers",
                                  "--time-limit", "--memory-mb", "--width"], ["--json", "--force"], 2)
            return ["exercise", "grade", sub_dir, *extra], ""
        if sub == "watch":   # watch waits for saves until q (read from stdin)
            return ["exercise", "watch", ex, *ws, *self.options(["--time-limit", "--width"], ["--all", "--poll"],
                                                                1)], "q\n"
        if sub == "reset":
            return ["exercise", "reset", ex, *self.options(["--state-dir"], ["--all"], 1)], "y\n"
        values = {"check": ["--time-limit", "--memory-mb", "--width", "--file"], "hint": ["--level", "--file"],
                  "solution": ["--width"], "start": ["--state-dir"]}.get(sub, ["--width"])
        flags = {"check": ["--json", "--all"], "solution": ["--give-up"], "start": ["--force"]}.get(sub, ["--all"])
        return ["exercise", sub, ex, *ws, *self.options(values, flags, 2)], ""

    def bare(self) -> tuple[list[str], str]:
        return self.rng.choice([[], ["--nope"], ["nope"], ["--version"], ["-h"], ["--help"], [self.value()],
                                ["exercise"], ["exercise", "--nope"], ["run", "extra"], ["strides"],
                                ["trace"]]), ""

    def command(self) -> tuple[list[str], str]:
        kind = self.rng.choice(["run"] * 5 + ["strides"] * 2 + ["trace"] * 6 + ["lesson"] * 2 +
                               ["quiz", "compare", "lessons", "live", "bare"] + ["exercise"] * 4)
        args, stdin = getattr(self, kind)()
        if args and self.rng.random() < 0.04:
            words = 2 if args[:1] == ["exercise"] else 1
            return [*args[:words], "--help"], ""
        return args, stdin


def subcommand(args: list[str]) -> str:
    if not args or args[0].startswith("-"):
        return "(bare)"
    if args[0] == "exercise" and len(args) > 1 and not args[1].startswith("-"):
        return f"exercise {args[1]}"
    return args[0] if args[0] in ("run", "strides", "trace", "lessons", "lesson", "quiz", "compare", "live",
                                  "exercise") else "(bare)"


#: The live count ``trace`` writes on stderr while a long script runs (not the error's line).
PROGRESS = ("recording… ", "recording... ")


def _without_flood(err: str) -> str:
    """``err`` without what flood.py printed itself (its print goes to stderr where stdout is the command's JSON),
    the live count's lines written between its halves mended: a usage error found after the run (``--only`` naming
    no module the run entered) is one line of the command's own, after the script's."""
    kept = []
    for line in err.splitlines():
        line = re.sub(r"^line( \d+)?", "", line).replace(FLOOD_MARK, "").strip()
        if line and not re.fullmatch(r"\d+|☃+", line):
            kept.append(line)
    return "\n".join(kept)


def verdict(code: int, out: str, err: str, seconds: float) -> str | None:
    """What is wrong with one invocation's ending, or None."""
    output = out + err
    if seconds > LIMIT_S:
        return "timeout"
    if "Traceback" in output:
        return "traceback"
    if "internal error" in output:
        return "internal error"
    if code not in (0, 1, 2):
        return f"exit {code}"
    usage = [line for line in err.splitlines() if line.startswith("error:")]
    said = [line for line in _without_flood(err).strip().splitlines()
            if not line.startswith(PROGRESS + ("bash: warning: setlocale",))]
    if code == 2 and usage and len(said) > 1:
        return "usage error over one line"
    if usage and "--help)" in usage[0] and code != 2:
        return f"usage error with exit {code}"
    return None


#: Environments a fork can take (read after the start: terminal size, colour, TERM).
FORK_ENVS = [{}, {}, {}, {"COLUMNS": "0"}, {"COLUMNS": "1"}, {"COLUMNS": "20"}, {"COLUMNS": "100000"},
             {"COLUMNS": "abc"}, {"LINES": "999999999"}, {"TERM": "dumb"}, {"NO_COLOR": "1"},
             {"FORCE_COLOR": "1"}, {"NO_COLOR": "1", "FORCE_COLOR": "1"}]
#: Environments and redirections only a fresh interpreter shows.
PROCESS_ENVS = [({"PYTHONIOENCODING": "ascii"}, ""), ({"PYTHONIOENCODING": "latin-1"}, ""),
                ({"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0"}, ""), ({"LC_ALL": "tr_TR.UTF-8"}, ""),
                ({"LANG": "C.UTF-8", "LC_ALL": "POSIX"}, ""), ({"TERM": "dumb", "COLUMNS": "20"}, ""),
                ({}, ">&-"), ({}, "2>&-"), ({}, "<&-"), ({}, "| head -1"), ({"FORCE_COLOR": "1"}, "| head -1"),
                ({"PYTHONIOENCODING": "ascii"}, ">&-"), ({}, "| true"), ({"NO_COLOR": "1"}, "| head -c 1")]


class Runner:
    def __init__(self, jobs: int, base_env: dict[str, str]):
        sys.path.insert(0, str(ROOT / "tests"))
        from zygote import Zygote

        self.base_env = base_env
        preload = ("torch", "shapetrace.cli.app", "shapetrace.engine.tracer", "rich.console", "typer")
        self.zygotes = [Zygote(preload, env=base_env) for _ in range(jobs)]

    def forked(self, slot: int, args: list[str], stdin: str, env: dict) -> tuple[int, str, str, float]:
        code = "import runpy; runpy.run_module('shapetrace', run_name='__main__', alter_sys=True)"
        start = time.monotonic()
        try:
            proc = self.zygotes[slot].run(code, *args, input=stdin, env={**self.base_env, **env}, timeout=LIMIT_S,
                                          argv0="-m")
        except subprocess.TimeoutExpired as exc:
            return 124, str(exc.output or ""), str(exc.stderr or ""), time.monotonic() - start + 1
        return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start

    def process(self, args: list[str], stdin: str, env: dict, redirect: str) -> tuple[int, str, str, float]:
        line = f"{shlex.quote(sys.executable)} -m shapetrace {' '.join(map(shlex.quote, args))} {redirect}"
        if args[:2] == ["exercise", "watch"] and "<&-" in redirect:
            # (a watch with no keyboard watches until it is stopped, as one started in the background with
            # ``&`` must: its end is Ctrl-C's, sent here after WATCH_S; it must end on it, at once and cleanly)
            line = f"timeout --preserve-status -s INT {WATCH_S} {line}"
        if redirect.startswith("|"):
            line = f"set -o pipefail; {line}"
        start = time.monotonic()
        try:
            proc = subprocess.run(["bash", "-c", line], capture_output=True, timeout=LIMIT_S + 5, input=stdin.encode(),
                                  env={**self.base_env, **env})
        except subprocess.TimeoutExpired:
            return 124, "", "", time.monotonic() - start
        code = proc.returncode
        if redirect.startswith("|") and code == 141:   # SIGPIPE on head's side is the pipe, not shapetrace
            code = 0
        decode = lambda b: b.decode("utf-8", "replace")  # noqa: E731
        return code, decode(proc.stdout), decode(proc.stderr), time.monotonic() - start

    def close(self) -> None:
        for z in self.zygotes:
            z.close()


def plan(opts, files: dict[str, str], ws: str) -> list[tuple[list[str], str, dict, str | None]]:
    rng = random.Random(opts.seed)
    draw = Draw(rng, files, ws)
    jobs: list[tuple[list[str], str, dict, str | None]] = []
    for _ in range(opts.forked):
        args, stdin = draw.command()
        jobs.append((args, stdin, rng.choice(FORK_ENVS), None))
    fixed = [["lessons"], ["exercise", "list", "--workspace", ws], ["quiz", "--count", "1"], ["lesson", "1"],
             ["run"], ["lesson", "12"], ["trace", files["mine.py"]], ["trace", files["closes.py"]],
             ["trace", files["closesfd.py"]], ["run", "--diagrams"], ["strides", "2,3,4", "transpose(1,2)"],
             ["exercise", "check", "split-heads", "--workspace", ws], ["exercise", "watch", "split-heads",
                                                                        "--workspace", ws], ["compare"],
             ["trace", files["flood.py"]], ["run", "--json"], ["exercise", "grade", ws], ["run", "--step"],
             ["trace", files["ki.py"]], ["trace", files["osexit.py"]]]
    for i in range(opts.subprocess):
        env, redirect = PROCESS_ENVS[i % len(PROCESS_ENVS)]
        args, stdin = (rng.choice(fixed), "q\n") if i < 100 else draw.command()
        jobs.append((args, stdin, env, redirect))
    return jobs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--forked", type=int, default=900)
    parser.add_argument("--subprocess", type=int, default=160)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--log", default=None, help="append every invocation's outcome to this file")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files, ws = _files(d), str(d / "ws")
        os.chdir(d)
        base_env = dict(os.environ, PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(d / "state"), COLUMNS="100")
        for key in ("NO_COLOR", "FORCE_COLOR", "LINES"):
            base_env.pop(key, None)
        runner, jobs = Runner(opts.jobs, base_env), plan(opts, files, ws)
        done, per, failed, lock = Counter(), Counter(), [], threading.Lock()
        codes, slowest, log = Counter(), [0.0, None], open(opts.log, "a") if opts.log else None

        def worker(slot: int) -> None:
            for index in range(slot, len(jobs), opts.jobs):
                args, stdin, env, redirect = jobs[index]
                if redirect is None:
                    code, out, err, seconds = runner.forked(slot, args, stdin, env)
                else:
                    code, out, err, seconds = runner.process(args, stdin, env, redirect)
                why = verdict(code, out, err, seconds)
                with lock:
                    name = subcommand(args)
                    done[name] += 1
                    codes[code] += 1
                    if seconds > slowest[0]:
                        slowest[:] = [seconds, args]
                    shown = " ".join(f"{k}={v}" for k, v in env.items()) + " shapetrace " + shlex.join(args) + \
                        (f" {redirect}" if redirect else "")
                    if log:
                        print(f"{code}\t{seconds:.1f}\t{why or 'ok'}\t{shown}", file=log, flush=True)
                    if why:
                        per[name] += 1
                        failed.append((why, shown, (out + err)[-600:]))
                        print(f"FAIL {why}: {shown}\n    {(out + err)[-600:]!r}", flush=True)
                    if sum(done.values()) % 50 == 0:
                        print(f"{sum(done.values())} of {len(jobs)} invocations, {len(failed)} failures", flush=True)

        threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(opts.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        runner.close()
        os.chdir(ROOT)
    print(f"\n{'subcommand':<20} {'invocations':>11} {'failures':>8}")
    for name in sorted(done):
        print(f"{name:<20} {done[name]:>11} {per[name]:>8}")
    kinds = Counter(why.split(" ")[0] if why.startswith("exit") else why for why, _, _ in failed)
    print(f"{len(jobs)} invocations ({opts.forked} forked, {opts.subprocess} subprocesses, {opts.jobs} at once): "
          f"{len(failed)} failures {dict(kinds)}; exit codes {dict(sorted(codes.items()))}; "
          f"slowest {slowest[0]:.1f} s: {slowest[1]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
