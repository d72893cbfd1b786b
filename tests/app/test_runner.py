"""``shapetrace trace SCRIPT``: cProfile-style execution, filters, --json, failures, bad input."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import ROOT, cli_forked, cli_in_process

from shapetrace import parse_dims
from shapetrace.app.script import Filters, _path_matches, run_script
from shapetrace.engine.dependencies import NO_MODULE

S = "tests/scripts/"
DIMS = "B=2,T=6,D=512,H=8"


@pytest.fixture(autouse=True)
def _in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_textbook_table(cli):
    res = cli("trace", S + "textbook.py", "--dims", DIMS, "--width", "100")
    assert res.exit_code == 0, res.stdout
    out = res.stdout
    assert out.startswith("output shape (2, 6, 512)\nshapetrace · textbook.py · B=2 T=6 D=512 H=8\n"
                          "d_k = D / H = 512 / 8 = 64\n")
    assert ("    2 transpose    [B=2, H=8, T=6, d_k=64]         (3072, 64, 512, 1)      "
            "view          strided") in out
    assert "textbook.py:18" in out and "textbook.py:22" in out
    assert "17 ops · 9 views · 4 copies (96 KiB) · 7 computed buffers (124 KiB)" in out
    assert out.endswith("\n✓ checked all 16 ops that could carry a layout bug: every axis keeps its meaning from "
                        "input to\n  output; held on the values: batch entries stay apart, each token depends on "
                        "itself, heads\n  stay apart\n")


def test_script_gets_argv_and_its_folder_on_sys_path():
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    run = run_script(S + "two_parts.py", ["a", "--b"], parse_dims(DIMS))
    assert run.exception is None
    assert (sys.argv, sys.path) == (saved_argv, saved_path)  # restored
    sources = [e.source for e in run.trace.events]
    assert sources == ["tests/scripts/two_parts.py:10"] * 3 + ["tests/scripts/mylib/blocks.py:14"] * 2 \
        + ["tests/scripts/mylib/blocks.py:15"] * 2


def test_script_output_keeps_its_args(cli):
    res = cli("trace", S + "two_parts.py", "--dims", DIMS, "x", "--flag")
    assert res.stdout.startswith("argv ['x', '--flag'] shape (2, 6, 512)\n")


def test_only_keeps_ops_under_one_method(cli):
    res = cli("trace", S + "two_parts.py", "--dims", DIMS, "--only", "Block.forward", "--width", "100")
    assert res.exit_code == 0
    assert "two_parts.py:10" not in res.stdout and "blocks.py:14" in res.stdout
    assert "(3 more ops hidden by --only/--include/--exclude" in res.stdout
    run = run_script(S + "two_parts.py", [], parse_dims(DIMS), filters=Filters(only=["Block.forward"]))
    assert [e.op for e in run.trace.events] == ["view", "transpose", "transpose", "reshape"]
    assert [e.index for e in run.trace.events] == [0, 1, 2, 3]
    assert all("Block.forward" in e.stack for e in run.trace.events)
    assert run.trace.events[0].output.dims == ("B", "T", "H", "d_k")


def test_include_and_exclude_by_file():
    def ops(**kw):
        run = run_script(S + "two_parts.py", [], parse_dims(DIMS), filters=Filters(**kw))
        return [(e.op, e.source.rsplit("/", 1)[-1]) for e in run.trace.events]

    lib = [("view", "blocks.py:14"), ("transpose", "blocks.py:14"), ("transpose", "blocks.py:15"),
           ("reshape", "blocks.py:15")]
    assert ops(include=["tests/scripts/mylib"]) == lib
    assert ops(include=["blocks.py"]) == lib
    assert ops(exclude=["mylib"]) == [("transpose", "two_parts.py:10"), ("contiguous", "two_parts.py:10"),
                                      ("transpose", "two_parts.py:10")]
    assert ops(only=["prepare"], exclude=["two_parts.py"]) == []


def test_path_matching():
    assert _path_matches("tests/scripts/mylib/blocks.py", "mylib")
    assert _path_matches("tests/scripts/mylib/blocks.py", "blocks.py")
    assert _path_matches("tests/scripts/mylib/blocks.py", "tests/scripts/*/blocks.py")
    assert not _path_matches("tests/scripts/two_parts.py", "mylib")
    assert not _path_matches("tests/scripts/mylib/blocks.py", "locks.py")


def test_json_is_the_only_thing_on_stdout():
    res = cli_forked("trace", S + "textbook.py", "--dims", DIMS, "--json", cwd=ROOT)  # stdout: a pipe of its own
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    ref = json.loads(cli_in_process("run", "--json", cwd=ROOT).stdout)  # the reference to compare with
    assert set(data) == set(ref) == {"version", "dims", "events", "diagnostics", "verdict"}
    assert set(data["events"][0]) == set(ref["events"][0])
    assert [e["output"]["dims"] for e in data["events"]][:3] == [e["output"]["dims"] for e in ref["events"]][:3]
    assert data["events"][0]["source"] == "tests/scripts/textbook.py:18"
    assert "output shape (2, 6, 512)" in res.stderr and "output shape" not in res.stdout


def test_equal_sizes_seeded_by_size_give_the_ambiguity_note(cli):
    res = cli("trace", S + "textbook.py", "--dims", "B=8,T=8,D=64,H=8", "--width", "100", "8", "8", "64", "8")
    assert res.exit_code == 0   # (the input [8, 8, 64] is read [B, T, D] or [T, B, D]: a choice of sizes)
    assert "i note ambiguous-sizes: B = T = 8: names found from sizes alone are ambiguous." \
        in " ".join(res.stdout.split())
    run = run_script(S + "named.py", [], parse_dims("B=2,T=8,D=64,H=8"))
    assert [d.kind for d in run.trace.diagnostics] == []
    assert [e.output.dims for e in run.trace.events] == [
        ("B", "T", "H", "d_k"), ("B", "H", "T", "d_k"), ("B", "H", "d_k", "T"), ("B", "H", "T", "T")]


def test_view_on_non_contiguous_fails_with_explanation(cli):
    res = cli("trace", S + "bad_view.py", "--dims", DIMS, "--width", "100")
    assert res.exit_code == 1
    out = res.stdout
    assert "    1 view" in out and "raised" in out
    assert "✗ #1 view raised  tests/scripts/bad_view.py:13" in out
    assert "operand 0: [B=2, T=6, H=8, d_k=64] strides (3072, 64, 384, 1), not contiguous" in out
    assert "torch: RuntimeError: view size is not compatible with input tensor's size and stride" in out
    assert "H → d_k: stride(H) = 384, but size(d_k) × stride(d_k) = 64 × 1 = 64" in out
    assert "fix 1: .contiguous().view(2, 6, 512)" in out and "fix 2: .reshape(2, 6, 512)" in out
    assert "no errors or warnings" not in out


def test_matmul_mismatch_fails_with_explanation(cli):
    res = cli("trace", S + "bad_matmul.py", "--dims", DIMS, "--width", "120")
    assert res.exit_code == 1
    assert "✗ #4 matmul raised  tests/scripts/bad_matmul.py:8" in res.stdout
    assert "operand 1: [B=2, H=8, T=6, d_k=64] strides (3072, 64, 512, 1), not contiguous" in res.stdout
    assert "sums over the last axis of the first operand (d_k=64) and the second-to-last axis of the " \
           "second (T=6)" in res.stdout
    assert "transpose k first: q @ k.transpose(-2, -1)" in res.stdout


def test_failure_with_json_keeps_stdout_json(cli):
    res = cli("trace", S + "bad_matmul.py", "--dims", DIMS, "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["events"][-1]["op"] == "matmul" and data["events"][-1]["error"].startswith("RuntimeError")
    assert "#4 matmul at tests/scripts/bad_matmul.py:8 raised RuntimeError" in " ".join(res.stderr.split())


def test_plain_python_error_after_some_ops(cli):
    res = cli("trace", S + "raises.py", "--width", "100")
    assert res.exit_code == 1
    assert "2 ops · 2 views" in res.stdout
    assert "✗ the script raised ValueError: boom: the script gave up  tests/scripts/raises.py:7" in res.stdout
    assert "(raised outside the tensor ops shapetrace records" in res.stdout


def test_failing_elementwise_op_gets_a_row_and_an_explanation(cli):
    res = cli("trace", S + "bad_broadcast.py", "--dims", DIMS, "--width", "100")
    assert res.exit_code == 1
    out = " ".join(res.stdout.split())
    assert "4 add raised" in out and "✗ #4 add raised tests/scripts/bad_broadcast.py:9" in out
    assert "operand 0: [B=2, H=8, T=6, T=6] strides (288, 36, 6, 1), contiguous" in out
    assert "operand 1: [5, 5] strides (5, 1), contiguous" in out
    assert "torch: RuntimeError: The size of tensor a (6) must match the size of tensor b (5)" in out
    assert "At axis -1 (from the right) the sizes are T=6 and 5" in out


def test_caught_exceptions_in_untracked_ops_leave_no_row():
    import torch

    import shapetrace

    with shapetrace.trace() as t:
        try:
            torch.zeros(2, 3) + torch.zeros(4)
        except RuntimeError:
            pass
        torch.zeros(2, 3).view(3, 2)
    assert [e.op for e in t.events] == ["view"] and t.events[0].error is None


def test_bad_scripts_get_one_clear_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\ndef f(:\n")
    cases = [(str(broken), 1, f"error: {broken}:2: syntax error: invalid syntax (nothing was traced)"),
             ("missing.py", 2, "error: no such script: missing.py"),
             (S + "no_tensor.py", 1, "error: tests/scripts/no_tensor.py ran to the end without a tensor op "
                                     "that shapetrace records")]
    for script, code, message in cases:
        res = cli_in_process("trace", script, cwd=ROOT, env={"COLUMNS": "250"})
        assert res.returncode == code, res.stderr
        assert res.stderr.startswith(message), res.stderr
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_device_meta_on_a_script(cli):
    res = cli("trace", S + "textbook.py", "--dims", DIMS, "--device", "meta", "--width", "100")
    assert res.exit_code == 0
    assert "on the meta device (--device meta)" in res.stdout
    assert ("    2 transpose    [B=2, H=8, T=6, d_k=64]         (3072, 64, 512, 1)      "
            "view          strided") in res.stdout


def test_auto_meta_from_dims(cli):
    res = cli("trace", S + "textbook.py", "--dims", "B=8,T=32768,D=8192,H=64", "--device", "auto",
              "--width", "100", "8", "32768", "8192", "64")
    assert res.exit_code == 0, res.stdout
    assert "more than --max-memory 1 GiB: running on the meta device" in res.stdout
    assert "[B=8, H=64, T=32768, T=32768]" in res.stdout


def test_environment_variables_untouched():
    before = dict(os.environ)
    run_script(S + "textbook.py", [], parse_dims(DIMS))
    assert dict(os.environ) == before


def test_trace_without_names_says_nothing_was_checked(tmp_path):
    """No --dims and no shapetrace.name: the all-clear would be a false claim, so the trace says why
    nothing was checked and how to fix it."""
    script = tmp_path / "mine.py"
    script.write_text("import torch\nx = torch.randn(2, 6, 512)\nq = x.view(2, 6, 8, 64).transpose(1, 2)\n")
    proc = cli_forked("trace", str(script), "--width", "200")
    assert proc.returncode == 0, proc.stderr
    assert "every axis keeps its meaning" not in proc.stdout
    assert " ".join(proc.stdout.split()).endswith(   # (wrapped at 200 columns)
        "? nothing was checked: no axis could be named, so the table shows sizes only; not measured: " + NO_MODULE
        + ". Name them with --dims (e.g. --dims B=2,T=6,D=512,H=8) or with shapetrace.name(x, \"B T D\") in the "
        "script.")


def test_ctrl_c_during_trace_prints_the_table_so_far(tmp_path):
    """SIGINT while the script runs: the ops recorded so far, "interrupted at op N", exit 130; and a
    note that the op run in another thread is not in the table."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, threading, time, torch\n"
        "x = torch.randn(2, 6, 512)\n"
        "q = x.view(2, 6, 8, 64)\n"
        "t = threading.Thread(target=lambda: x.view(2, 6, 8, 64)); t.start(); t.join()\n"
        "q = q.transpose(1, 2)\n"
        "print('READY', file=sys.stderr, flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "shapetrace", "trace", str(script), "--width", "200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().strip() == "READY"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = out.splitlines()
    assert lines[-1] == "interrupted at op 2 (Ctrl-C): the table shows the 2 ops recorded before it"
    assert "    1 transpose    [2, 8, 6, 64]" in out
    assert ("i the script started 1 thread: shapetrace records the thread that runs the script, so ops run "
            "in other threads are not in the table") in out


def test_a_keyboard_interrupt_the_script_raises_is_its_own_failure(cli, tmp_path):
    """Not a Ctrl-C: no "interrupted" line, no exit 130, but the script's exception under the table."""
    script = tmp_path / "stops.py"
    script.write_text("import torch\nx = torch.randn(2, 6, 512)  # (B, T, D)\n"
                      "q = x.view(2, 6, 8, 64)  # (B, T, H, d_k)\nraise KeyboardInterrupt('stop here')\n")
    run = run_script(str(script))
    assert isinstance(run.exception, KeyboardInterrupt) and not run.interrupted and not run.ctrl_c
    result = cli_run(script)
    assert result.returncode == 1 and "interrupted" not in result.stdout + result.stderr
    line = _line_with("✗ the script raised", result.stdout)
    assert line.startswith("✗ the script raised KeyboardInterrupt: stop here  ") and line.endswith("stops.py:4")
    assert "    0 view         [2, 6, 8, 64]" in result.stdout


def test_os_exit_in_the_script_ends_it_with_the_table(tmp_path):
    script = tmp_path / "quits.py"
    script.write_text("import os, torch\nx = torch.randn(2, 6, 512)  # (B, T, D)\n"
                      "q = x.view(2, 6, 8, 64)  # (B, T, H, d_k)\nos._exit(7)\n")
    result = cli_run(script)
    assert result.returncode == 1, result.stderr
    assert "    0 view         [2, 6, 8, 64]" in result.stdout
    line = _line_with("✗ the script", result.stdout)
    assert line.startswith("✗ the script ended the process with os._exit(7)  ") and line.endswith("quits.py:4")
    assert os._exit.__module__ in ("posix", "nt")   # put back after the run


def test_os_exit_in_a_forked_child_still_ends_only_the_child(tmp_path):
    """multiprocessing's children end with os._exit: inside them it must stay the real one."""
    script = tmp_path / "forks.py"
    script.write_text("import os, torch\nx = torch.randn(2, 6, 512)\npid = os.fork()\n"
                      "if pid == 0:\n    os._exit(3)\n_, status = os.waitpid(pid, 0)\n"
                      "assert os.waitstatus_to_exitcode(status) == 3\nq = x.view(2, 6, 8, 64)\n")
    result = cli_run(script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 op · 1 view" in result.stdout


def cli_run(script):
    """The script may end its process (os._exit, a fork): a process of its own, forked from the
    suite's zygote (tests/zygote.py), since its start is not what these tests prove."""
    return cli_forked("trace", str(script), "--width", "300")


def _line_with(start: str, out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_ctrl_c_in_json_is_a_stop_not_the_scripts_exception(tmp_path):
    """A real Ctrl-C (SIGINT) is not the traced code's own failure: the JSON verdict says what stopped the
    run and stays ``?`` (the rest of the script was not seen), where it read "✗ the traced code raised
    KeyboardInterrupt" while the CLI said "interrupted" and exited 130."""
    script = tmp_path / "stopped.py"
    script.write_text("import os, signal, time, torch\n"
                      "x = torch.randn(2, 6, 512)\n"
                      "q = x.view(2, 6, 8, 64).transpose(1, 2)  # (B, H, T, d_k)\n"
                      "os.kill(os.getpid(), signal.SIGINT)\n"
                      "time.sleep(30)\n")
    res = cli_forked("trace", str(script), "--json", "--dims", DIMS, timeout=60)
    assert res.returncode == 130, res.stderr
    assert res.stderr.strip().endswith("error: interrupted at op 2 (Ctrl-C)")
    verdict = json.loads(res.stdout)["verdict"]
    assert (verdict["mark"], verdict["raised"], verdict["stopped"]) == ("?", None, "Ctrl-C")
    assert verdict["line"] == ("? stopped by Ctrl-C after 2 recorded ops, the rest of the code not seen: checked 2 "
                               "of 2 ops that could carry a layout bug; no errors or warnings in what was checked; "
                               "not measured: " + NO_MODULE)
