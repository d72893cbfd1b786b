"""Hostile options for every command: one clear line and exit 0/1/2, never a traceback, an
"internal error", a hang or unbounded memory.

The fixed cases are the fuzzer's findings (issue #13), each with the line it must now get; the
hypothesis test then draws more combinations over every command's options, bounded in examples,
time and memory so the whole module stays well under a minute.
"""

from __future__ import annotations

import os
import resource
import sys

import pytest
from conftest import ROOT, cli_forked, cli_in_process, run_cli

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BIG = str(10**30)
#: Growth of this process's peak memory over the whole module (a hang: the suite's timeout guard).
MEMORY_LIMIT_KIB = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "folder").mkdir()
    (d / "nonutf8.txt").write_bytes(b"\xff\xfe\x00\n")
    (d / "afile").write_text("x\n")
    (d / "mine.py").write_text("import torch\nx = torch.randn(2, 6, 512)\nq = x.view(2, 6, 8, 64).transpose(1, 2)\n")
    (d / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\nx = torch.randn(2, 6, 512)\nq = x.view(2, 6, 8, 64)\n")
    (d / "nul.py").write_bytes(b"import torch\nx = 1\x00\n")
    (d / "closes.py").write_text("import sys, torch\nx = torch.randn(2, 6)\ny = x.view(3, 4)\nsys.stdout.close()\n")
    return d


def invoke(args: list[str], stdin: str = "") -> tuple[int, str]:
    """The CLI in-process, as ``main()`` runs it: exit code and everything printed."""
    from typer.testing import CliRunner

    from shapetrace.cli.app import _check_argument_lengths, app

    try:
        _check_argument_lengths(args)
    except SystemExit as exc:
        return int(exc.code), "argument too long"
    result = CliRunner().invoke(app, args, input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        return 99, "".join(traceback.format_exception(result.exception))
    return result.exit_code, result.output


def assert_clean(code: int, output: str, args) -> None:
    assert code in (0, 1, 2), (args, code, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, (args, output[-2000:])


# -- the fuzzer's findings, one by one ---------------------------------------------------------

def _cases(d):
    return [
        (["run", "--seed", BIG], 2, f"--seed {BIG}: use a whole number from 0 to 2**64 - 1"),
        (["run", "--batch", BIG], 2, f"--batch {BIG} is too large: sizes go up to 2**40"),
        (["run", "--max-memory", "9" * 400], 2, "cannot read --max-memory (a 400-character value)"),
        (["run", "--device", "meta", "--seq-len", str(10**10)], 2,
         "the scores B·H·T·T would have 1.6e+21 elements, more than torch can index (2**62)"),
        (["run", "--predict", "--answers", str(d / "folder")], 2, "is a folder; give a file with one answer per line"),
        (["run", "--predict", "--answers", str(d / "nonutf8.txt")], 2, "nonutf8.txt:1: not UTF-8 text"),
        (["run", "--predict", "--answers", "/dev/zero"], 2,
         "--answers /dev/zero is a character device, not a regular file"),
        (["quiz", "--answers-from", "/dev/zero"], 2,
         "--answers-from /dev/zero is a character device, not a regular file"),
        (["quiz", "--answers-from", str(d / "folder")], 2, "is a folder; give a file with one answer per line"),
        (["exercise", "list", "--workspace", str(d / "afile")], 2, "is a file; give a folder for your exercise files"),
        (["exercise", "check", "split-heads", "--time-limit", "nan"], 2, "--time-limit nan: use a number of seconds"),
        (["exercise", "check", "split-heads", "--time-limit", "inf"], 2, "--time-limit inf: use a number of seconds"),
        (["run", "--width", "100000000"], 2, "--width 100000000: use 40 to 1000 columns"),
        (["run", "--seq-len", "9" * 4500], 2, "argument too long"),
        (["run", "--d-model", str(10**20 + 1), "--heads", "2"], 2, "is too large: sizes go up to 2**40"),
        (["run", "--heads", "7"], 2, "7 does not divide 512"),
        (["strides", "6", "view(" + "-" * 1990 + "6)"], 0, "1 step · 1 view"),  # an even run of signs: view(6)
        (["strides", "6", "view(" + "1+" * 900 + "6)"], 2, "the chain is nested too deeply (at most 100 levels)"),
        (["strides", "1", "expand(1024*1024*1024).contiguous()"], 0, "running on torch's meta device"),
        (["trace", "/dev/zero"], 2, "script /dev/zero is a character device, not a regular file: give a file"),
        (["trace", str(d / "nul.py")], 2, "nul.py:2: a NUL byte: this is not a Python source file"),
        (["trace", str(d / "bom.py"), "--dims", "B=2,T=6,D=512,H=8"], 0, "[B=2, T=6, H=8, d_k=64]"),
        # issue 35 round 3's fuzz: an empty second name ran every implementation, then an IndexError
        (["compare", "--diff", "sdpa", ""], 2, "--diff needs two implementations, e.g. --diff manual sdpa"),
        (["compare", "--diff", "", ""], 2, "--diff needs two implementations, e.g. --diff manual sdpa"),
        # (an implementation against itself: nothing to show, said as a usage error before any run)
        (["compare", "--diff", "sdpa", "sdpa"], 2,
         "--diff needs two different implementations, e.g. --diff manual sdpa"),
        (["compare", "--diff", "manual", "manual"], 2,
         "--diff needs two different implementations, e.g. --diff sdpa manual"),
    ] + [([cmd, *sub, "--width", "-5"], 2, "--width -5: use 40 to 1000 columns") for cmd, *sub in
         (["run"], ["strides", "6", "view(6)"], ["trace", str(d / "mine.py")], ["lessons"], ["lesson", "1"],
          ["quiz"], ["compare"], ["exercise", "list"], ["exercise", "hint", "split-heads"])]


@pytest.mark.parametrize("size", ["1\n", "\t1GiB", "1\rGiB", "512\x1bMiB", "1GiB\x00", "\n1"])
@pytest.mark.parametrize("command", ["run", "trace"])
def test_a_size_with_a_control_character_is_a_usage_error(files, command, size):
    # issue 35 round 3's fuzz (`--max-memory $'1\n'`, as a shell script's `$(cat limit.txt)` passes it): the
    # surrounding whitespace was stripped and the size read as 1 B; now one line, exit 2, the value as typed
    args = [command, *([str(files / "mine.py")] if command == "trace" else []), "--max-memory", size]
    got, output = invoke(args)
    assert (got, output.strip()) == (2, f"error: cannot read --max-memory {size!r}: write a size such as 1GiB, "
                                        "512MiB or 2GB"), output


def test_a_size_between_plain_spaces_still_reads():
    from shapetrace.app.devices import parse_memory

    assert [parse_memory(s) for s in (" 512 MiB ", "1GiB", "2 GB")] == [512 << 20, 1 << 30, 2 * 10**9]


def test_every_finding_gets_one_clear_line(files):
    for args, code, needle in _cases(files):
        got, output = invoke(args)
        assert_clean(got, output, args)
        assert got == code, (args, output[-1500:])
        assert needle in " ".join(output.split()), (args, needle, output[-1500:])


# -- and hypothesis over every command's options ------------------------------------------------

INTS = st.one_of(st.integers(-3, 70), st.sampled_from([0, -1, 2**31, 2**63, 2**64, 10**30, -(10**30)]))
FLOATS = st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e308", "0.5", "x"])
TEXT = st.one_of(st.sampled_from(["", " ", "-", "--", "\x00", "é", "../..", "1GiB", "9" * 60, "B=2,T=6"]),
                 st.text(max_size=12))


def _paths(d):
    return st.sampled_from(["/dev/zero", "/dev/null", "/nonexistent/x", str(d / "folder"), str(d / "afile"),
                            str(d / "nonutf8.txt"), str(d / "missing.md"), str(d / "folder" / "new.md")])


def _commands(d):
    paths, ints = _paths(d), INTS.map(str)
    sizes = st.sampled_from(["--d-model", "--heads", "--batch", "--seq-len", "--seed", "--kv-len", "--kv-heads",
                             "--diagram", "--width"])
    run_opts = st.one_of(
        st.tuples(sizes, ints),
        st.tuples(st.sampled_from(["--max-memory", "--explain", "--theme", "--device", "--impl", "--mask", "--pad",
                                   "--pad-side", "--break", "--preset"]), TEXT),
        st.tuples(st.sampled_from(["--answers", "--export"]), paths),
        st.tuples(st.sampled_from(["--dropout", "--auto"]), FLOATS),
        st.tuples(st.sampled_from(["--causal", "--compact", "--all", "--json", "--force", "--train",
                                   "--predict", "--long-names", "--diagrams"])),
    )
    flat = st.lists(run_opts, max_size=3).map(lambda opts: [x for o in opts for x in o])
    return st.one_of(
        flat.map(lambda o: ["run", "--d-model", "64", "--heads", "4", "--seq-len", "4", *o]),
        st.tuples(TEXT, TEXT, st.lists(st.tuples(st.sampled_from(["--dims", "--heads", "--rows", "--width"]),
                                                 st.one_of(TEXT, ints)), max_size=2))
        .map(lambda t: ["strides", t[0] or "6", t[1] or "view(6)", *[x for o in t[2] for x in o]]),
        st.lists(st.tuples(st.sampled_from(["--dims", "--only", "--include", "--exclude", "--width", "--device",
                                            "--max-memory", "--export"]), st.one_of(TEXT, ints, paths)),
                 max_size=2).map(lambda o: ["trace", str(d / "mine.py"), *[x for p in o for x in p]]),
        st.tuples(st.sampled_from(["lesson", "lessons", "quiz", "compare"]),
                  st.lists(st.tuples(st.sampled_from(["--width", "--count", "--seed", "--topic", "--heads",
                                                      "--d-model", "--answers-from"]),
                                     st.one_of(ints, TEXT, paths)), max_size=2))
        .map(lambda t: [t[0], *(["1"] if t[0] == "lesson" else []), *[x for o in t[1] for x in o]]),
        st.tuples(st.sampled_from(["list", "hint", "solution"]), TEXT, st.one_of(paths, TEXT))
        .map(lambda t: ["exercise", t[0], *([t[1] or "split-heads"] if t[0] != "list" else []),
                        "--workspace", t[2] or "."]),
    )


def test_hypothesis_over_every_command(files, monkeypatch, tmp_path):
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seen = []

    @settings(max_examples=int(os.environ.get("SHAPETRACE_FUZZ_EXAMPLES", "60")), deadline=None, database=None,
              suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_commands(files))
    def one(args):
        code, output = invoke(args)
        seen.append(code)
        assert_clean(code, output, args)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert grown < MEMORY_LIMIT_KIB, (args, grown)

    one()
    assert 2 in seen and len(seen) >= 30  # it did reach usage errors, and ran many cases


def test_usage_errors_never_import_torch(files):
    """Every usage error is found before torch is imported, in one process for all of them (how fast
    that is: benchmarks/bench_startup.py, as a ratio to ``import torch`` measured in the same run)."""
    cases = [["run", "--heads", "7"], ["run", "--explain", "x"], ["run", "--export", "a.pdf"],
             ["run", "--device", "nope"], ["run", "--max-memory", "x"], ["run", "--break", "nope"],
             ["run", "--predict", "--answers", "missing.txt"], ["run", "--step", "--predict"],
             ["run", "--seed", BIG], ["run", "--width", "-5"], ["trace", "nope.py"],
             ["trace", str(files / "mine.py"), "--export", "nofolder/x.md"], ["trace", "/dev/zero"],
             ["strides", "6", "foo()"], ["strides", "0", "view(1)"], ["compare", "--heads", "7"], ["lesson", "99"],
             ["quiz", "--answers-from", "missing"], ["exercise", "check", "nope-id"],
             ["exercise", "check", "split-heads", "--time-limit", "nan"]]
    code = (
        "import io, json, sys, time, contextlib\n"
        "from shapetrace.cli.app import main\n"
        "out = []\n"
        f"for args in {cases!r}:\n"
        "    sys.argv = ['shapetrace', *args]\n"
        "    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main()\n"
        "        except SystemExit as e:\n"
        "            code = e.code\n"
        "    out.append([args, code, 'torch' in sys.modules])\n"
        "print(json.dumps(out))\n")
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=files)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    assert [tuple(r) for r in results] == [(c, 2, False) for c in cases]


@pytest.mark.parametrize("args, line", [
    (["trace", "mine.py", "--export", "a\nb"],
     "error: --export a\\nb: unknown format (no suffix); use a path ending in .svg, .html, .md or .txt\n"),
    (["trace", "no\x1b[2J\nsuch.py"], "error: no such script: no\\x1b[2J\\nsuch.py\n"),
])
def test_a_usage_error_is_one_line_whatever_the_value(args, line, files):
    """A value with a newline or an escape sequence is shown as escapes on the error's one line (issue 35
    round 3's fuzz: ``--export $'a\\nb'`` gave an error on two lines; a raw ESC would colour the terminal)."""
    proc = cli_in_process(*args, cwd=files)
    assert (proc.returncode, proc.stderr) == (2, line), proc.stderr


def test_a_script_that_closes_stdout_still_gets_its_table(files):
    proc = cli_forked("trace", str(files / "closes.py"))  # (stdout a pipe of its own; its start is not the point)
    assert proc.returncode == 0, proc.stderr
    assert "1 op · 1 view" in proc.stdout and "Traceback" not in proc.stderr


def test_missing_script_is_answered_in_a_fresh_process_without_importing_torch():
    """``python -m shapetrace trace nope.py`` answers before torch is imported (Python's own import log
    says which modules a fresh process loaded; the time it takes is in benchmarks/bench_startup.py)."""
    proc = run_cli("trace", "nope.py", env={"PYTHONPROFILEIMPORTTIME": "1"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines[-1] == "error: no such script: nope.py"
    imported = [line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")]
    assert "shapetrace.cli.app" in imported and not [m for m in imported if m.split(".")[0] == "torch"]


@pytest.mark.parametrize("args", [["run", "--predict"], ["quiz", "--count", "1"]])
def test_piped_answers_are_read_with_a_bound(args, monkeypatch, tmp_path):
    """An endless line on stdin (``< /dev/zero``) is refused, not read until memory runs out."""
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path))
    code, output = invoke(args, stdin="9" * 100_000)
    assert_clean(code, output, args)
    assert code == 2 and "an answer line is longer than 4096 characters" in output
