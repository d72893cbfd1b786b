"""``trace``: --dims checked as ``run`` checks its options, sizes not found said plainly, and a
script that runs long or forever is stopped (--max-ops, --time-limit, Ctrl-C) with the table so far."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, cli_forked, cli_in_process

from shapetrace.engine.dependencies import NO_MODULE

TEXTBOOK = str(ROOT / "tests" / "scripts" / "textbook.py")


@pytest.mark.parametrize(("dims", "message"), [
    ("B=2,T=4,D=32,H=5",
     "error: 5 does not divide 32: --dims H must divide D (d_k = D / H); heads that divide 32 near 5: 4, 8"),
    ("B=2,T=4,D=4,H=8", "error: --dims H=8 is more than D=4: each head needs at least one feature (d_k = D / H)"),
    ("H=8,H_kv=3",
     "error: --dims H_kv=3 must divide H=8: each key/value head serves H / H_kv query heads, a whole number. "
     "Values that work: 1, 2, 4, 8"),
    ("T=1" + "0" * 400,
     "error: --dims T: (a number of about 401 digits) is too large: sizes go up to 2**40 (1099511627776)"),
])
def test_trace_checks_dims_like_run_checks_its_options(dims, message):
    """Before this, ``--dims ...,H=5`` with D=32 was accepted and gave a false nonstandard-head-split."""
    res = cli_in_process("trace", TEXTBOOK, "--dims", dims)
    assert res.returncode == 2, res.stdout
    assert res.stderr == message + "\n"
    assert res.stdout == ""


def test_sizes_the_script_does_not_use_are_named_not_told_to_use_dims():
    """--dims given but T=7 is no axis of the script: the answer says which size matched nothing
    and which sizes the script has, not "Name them with --dims"."""
    res = cli_in_process("trace", TEXTBOOK, "--dims", "B=2,T=7,D=512,H=8", "--width", "200")
    assert res.returncode == 0, res.stderr
    assert "Name them with --dims" not in res.stdout
    # the verdict, then the note under it on the size that disagrees with the input
    assert " ".join(res.stdout.split()).endswith(
        "? nothing was checked: no axis could be named, so the table shows sizes only; held on the values: heads "
        "stay apart; not measured: batch entries stay apart, each token depends on itself (the input's batch and "
        "token axes have no names). The sizes given with --dims (B=2 T=7 D=512 H=8) named no input tensor (T=7 "
        "matches no axis); the script's tensors have axes "
        "of sizes 2, 6, 8, 64, 512. Give the sizes the script uses, or name a tensor in the script with "
        "shapetrace.name(x, \"B T D\"). i --dims T=7, but the input [2, 6, 512] has 6 tokens (B=2 and D=512 are "
        "where --dims puts them): did you mean T=6?")


def test_an_unused_size_beside_used_ones_gets_a_note():
    res = cli_in_process("trace", TEXTBOOK, "--dims", "B=2,T=6,D=512,H=8,X=13", "--width", "200")
    assert res.returncode == 0, res.stderr
    assert ("i --dims X=13 matches no axis of any recorded tensor: the script does not use that size, so no "
            "axis in the table is named from it") in " ".join(res.stdout.split())
    assert ("✓ checked all 16 ops that could carry a layout bug: every axis keeps its meaning from input to output"
            in " ".join(res.stdout.split()))


@pytest.mark.parametrize(("args", "message"), [
    (["--max-ops", "0"], "error: --max-ops 0: use a whole number from 1 to 1,000,000"),
    (["--max-ops", "1" + "0" * 400], None),
    (["--time-limit", "nan"], "error: --time-limit nan: use a number of seconds from 0.1 to 86400"),
    (["--time-limit", "0"], "error: --time-limit 0.0: use a number of seconds from 0.1 to 86400"),
])
def test_bad_limits_are_usage_errors(args, message):
    res = cli_in_process("trace", TEXTBOOK, *args)
    assert res.returncode == 2, res.stdout
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")
    assert "Traceback" not in res.stderr
    if message:
        assert res.stderr == message + "\n"


def test_help_states_the_default_limits():
    res = cli_in_process("trace", "--help", env={"COLUMNS": "200"})
    text = " ".join(res.stdout.split())
    assert "--max-ops" in text and "[default: 10000]" in text
    assert "--time-limit" in text and "[default: 60.0]" in text


ENDLESS = ("import torch\n"
           "x = torch.randn(2, 6, 512)\n"
           "while True:\n"
           "    y = x.view(2, 6, 8, 64).transpose(1, 2)\n")

SLEEPY = ("import time, torch\n"
          "x = torch.randn(2, 6, 512)\n"
          "while True:\n"
          "    y = x.view(2, 6, 8, 64)\n"
          "    time.sleep(0.01)\n")


def test_max_ops_stops_an_endless_script_with_the_first_n_ops(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    res = cli_forked("trace", str(script), "--max-ops", "300", "--width", "200", timeout=60)   # (a hang fails here)
    assert res.returncode == 0, res.stderr
    assert "300 ops · 300 views" in res.stdout
    assert " ".join(res.stdout.split()).endswith(
        "--max-ops 300: the recording stopped after 300 ops; the table shows the 300 ops recorded until then "
        "(the script had not finished; raise the limit to record more)")
    # the loop's iterations fold into one line, not paragraphs of op names
    assert "\n2-299 view, transpose  the same two ops as #0-#1, 149 more times\n" in res.stdout


def test_time_limit_stops_a_sleeping_script_even_with_sigint_ignored(tmp_path):
    """A background job (SIGINT ignored) is stopped all the same, and the live count shows on stderr."""
    script = tmp_path / "sleepy.py"
    script.write_text(SLEEPY)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "shapetrace", "trace", str(script), "--time-limit", "2.5"],
                          capture_output=True, text=True, env=env, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))   # (a hang fails)
    assert proc.returncode == 0, proc.stderr
    last = " ".join(proc.stdout.split("\n\n")[-1].split())
    assert last.startswith("--time-limit 2.5: the recording stopped after 2.5 s (")
    assert last.endswith("(the script had not finished; raise the limit to record more)")
    assert "recording… " in proc.stderr
    assert "(stops at 10,000 ops or 2.5 s; Ctrl-C shows the table so far)" in proc.stderr


def test_a_script_that_catches_the_stop_is_stopped_again(tmp_path):
    script = tmp_path / "stubborn.py"
    # (the loop inside the try: a stop delivered at a loop's back-edge outside it would end the script, rightly
    # with the table, as a run under load once did; only the few steps after a caught stop are outside now)
    script.write_text("import time, torch\n"
                      "x = torch.randn(2, 6, 512)\n"
                      "while True:\n"
                      "    try:\n"
                      "        while True:\n"
                      "            x.view(2, 6, 8, 64)\n"
                      "            time.sleep(0.01)\n"
                      "    except BaseException:\n"
                      "        pass\n")
    res = cli_forked("trace", str(script), "--max-ops", "50", "--width", "200", timeout=60)   # (a hang fails here)
    # caught every time: the process is ended (bounded time and memory), one line, a failed run
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1].startswith(
        "error: --max-ops 50: the recording stopped after 50 ops, but the script caught the stop and kept "
        "running; it was ended after ")
    assert res.stderr.endswith(" ops, with no table (a bare except: or except BaseException: swallows Ctrl-C "
                               "too)\n")


def _interrupted_trace(script, columns: int, settle: float = 0.0, sent: int = signal.SIGINT):
    """``shapetrace trace script``, sent SIGINT once the script prints READY on stderr (after ``settle``
    seconds more): the process, its stdout and stderr. A process that does not end within 60 s of the
    signal fails the test (a hang); how fast it answers is measured by benchmarks/, not asserted here."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns))
    proc = subprocess.Popen([sys.executable, "-m", "shapetrace", "trace", str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while (line := proc.stderr.readline()) and line.strip() != "READY":
        pass
    time.sleep(settle)
    proc.send_signal(sent)
    out, err = proc.communicate(timeout=60)
    return proc, out, err


@pytest.mark.parametrize(("sent", "code", "by"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_ctrl_c_on_a_busy_endless_script_shows_the_ops_so_far(tmp_path, sent, code, by):
    """A script busy in pure Python after a few ops: Ctrl-C gives the table of those ops at once. SIGTERM too
    (``timeout 30 shapetrace trace slow.py``): on 681642f the process died with 143 and printed nothing (the
    signal's default); now the same table, "(SIGTERM)", and 128 + 15 as a shell reports it."""
    script = tmp_path / "busy.py"
    script.write_text("import sys, torch\n"
                      "x = torch.randn(2, 6, 512)\n"
                      "for _ in range(50):\n"
                      "    y = x.view(2, 6, 8, 64).transpose(1, 2)\n"
                      "print('READY', file=sys.stderr, flush=True)\n"
                      "n = 0\n"
                      "while True:\n"
                      "    n += 1\n")
    proc, out, err = _interrupted_trace(script, columns=200, settle=0.5, sent=sent)
    assert proc.returncode == code, err
    assert out.splitlines()[-1] == f"interrupted at op 100 ({by}): the table shows the 100 ops recorded before it"
    assert "\n 2-99 view, transpose  the same two ops as #0-#1, 49 more times\n" in out


def test_readme_max_ops_block_comes_from_a_real_run():
    res = cli_in_process("trace", "tests/scripts/forever.py", "--dims", "B=2,T=6,D=512,H=8", "--max-ops", "300",
                         "--width", "100", cwd=ROOT)
    assert res.returncode == 0, res.stderr
    live = {line.rstrip() for line in res.stdout.splitlines()}
    readme = (ROOT / "README.md").read_text()
    block = readme.split("--max-ops 300` at 100\ncolumns:")[1].split("```text\n")[1].split("```")[0]
    pasted = [line for line in block.splitlines() if line.strip()]
    assert len(pasted) == 9 and [line for line in pasted if line not in live] == []


def test_ctrl_c_after_thousands_of_ops_shows_the_last_rows_and_the_totals(tmp_path):
    """Past a few hundred ops, Ctrl-C shows the last 20 rows and the totals of all, skips the checks, and
    ends the process without the interpreter's teardown."""
    script = tmp_path / "endless.py"
    script.write_text("import sys, torch\n"
                      "x = torch.randn(2, 6, 512)\n"
                      "n = 0\n"
                      "while True:\n"
                      "    y = x.view(2, 6, 8, 64).transpose(1, 2)\n"
                      "    n += 1\n"
                      "    if n == 2500:\n"
                      "        print('READY', file=sys.stderr, flush=True)\n")
    proc, out, err = _interrupted_trace(script, columns=100)
    assert proc.returncode == 130, err
    n = int(re.search(r"interrupted at op ([\d,]+) \(Ctrl-C\)", out).group(1).replace(",", ""))
    assert n >= 5000
    rows = re.findall(r"^ *(\d+) (?:view|transpose) ", out, re.M)
    assert [int(r) for r in rows] == list(range(n - 20, n))
    assert f"\n{n} ops · {n} views · 0 copies (0 B)" in out
    assert (f"interrupted at op {n:,} (Ctrl-C): the table shows the last 20 of the {n:,} ops recorded before it "
            f"(#{n - 20}-#{n - 1}), and the totals of all; the checks were skipped") in " ".join(out.split())


def test_a_run_a_limit_stopped_is_never_a_check_mark(tmp_path):
    """Every recorded op of an endless loop is named and clean, but the loop never reached its output:
    the verdict is ``?`` and says what stopped it (it was ``✓ … every axis keeps its meaning from input
    to output``), in the table's line and in ``--json``."""
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    args = ("trace", str(script), "--dims", "B=2,T=6,D=512,H=8", "--max-ops", "40")
    res = cli_forked(*args, "--width", "200", timeout=60)
    assert res.returncode == 0, res.stderr
    line = ("? stopped by --max-ops 40 after 40 recorded ops, the rest of the code not seen: checked 40 of 40 ops "
            "that could carry a layout bug; no errors or warnings in what was checked; not measured: " + NO_MODULE)
    assert line in " ".join(res.stdout.split()) and "✓" not in res.stdout   # (wrapped at 200 columns)
    verdict = json.loads(cli_forked(*args, "--json", timeout=60).stdout)["verdict"]
    assert (verdict["mark"], verdict["stopped"], verdict["line"]) == ("?", "--max-ops 40", line)
