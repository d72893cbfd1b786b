"""Issue 23's bad-input round: every input answered in one line, exit 2 (usage) or 1 (failed run),
in bounded time; FIFOs and devices refused where a regular file is expected."""

from __future__ import annotations

import json
import os

import pytest
from conftest import ROOT, cli_forked, cli_in_process

from shapetrace.engine.dependencies import NO_MODULE

TEXTBOOK = str(ROOT / "tests" / "scripts" / "textbook.py")
LONG = "a" * 300
HUGE = "1" + "0" * 400


def one_line(res, code: int) -> str:
    assert res.returncode == code, (res.returncode, res.stdout[-500:], res.stderr[-500:])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize(("args", "what"), [
    (["trace", "{fifo}"], "script"),
    (["quiz", "--answers-from", "{fifo}"], "--answers-from"),
    (["run", "--predict", "--answers", "{fifo}"], "--answers"),
])
def test_a_fifo_is_refused_at_once(fifo, args, what):
    res = cli_forked(*[a.format(fifo=fifo) for a in args], timeout=60)   # (a FIFO read would hang: TimeoutExpired)
    assert one_line(res, 2) == f"error: {what} {fifo} is a FIFO (named pipe), not a regular file: give a file"


def test_a_large_regular_script_is_still_refused_by_size(tmp_path):
    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(9 << 20)
    line = one_line(cli_in_process("trace", str(big)), 2)
    assert line == f"error: script {big} is larger than 8 MiB: not a file shapetrace reads"


@pytest.mark.parametrize("command", ["run", "compare"])
def test_kv_len_with_400_zeros(command):
    res = cli_in_process(command, "--kv-len", HUGE)
    assert one_line(res, 2) == ("error: --kv-len (a number of about 401 digits) is too large: sizes go up to "
                                "2**40 (1099511627776)")


def test_an_overlong_export_name_is_a_usage_error(tmp_path):
    res = cli_in_process("run", "--export", str(tmp_path / (LONG + ".svg")))
    assert one_line(res, 2) == ("error: --export: the name aaaaaaaaaaaaaaaaaaaa…aaaaaaaa.svg is 304 bytes long; "
                                "names here go up to 241 bytes")
    assert os.listdir(tmp_path) == []


def test_an_overlong_workspace_name_is_a_usage_error(tmp_path):
    res = cli_in_process("exercise", "list", "--workspace", str(tmp_path / LONG))
    assert one_line(res, 2) == ("error: --workspace: the name aaaaaaaaaaaaaaaaaaaa…aaaaaaaaaaaa is 300 bytes long; "
                                "names here go up to 255 bytes")


def test_a_workspace_under_a_file_is_a_usage_error():
    res = cli_in_process("exercise", "start", "split-heads", "--workspace", "/dev/null/x")
    assert one_line(res, 2) == "error: --workspace /dev/null/x: /dev/null is a file, so no folder can be made under it"


def test_a_workspace_the_system_refuses_is_one_line(tmp_path):
    res = cli_in_process("exercise", "start", "split-heads", "--workspace", "/proc/self",
                  env={"SHAPETRACE_STATE_DIR": str(tmp_path)})
    line = one_line(res, 1)
    assert line.startswith("error: /proc/self/split_heads.py") and line.endswith(": No such file or directory")


def test_an_exception_whose_str_raises(tmp_path):
    script = tmp_path / "bad_str.py"
    script.write_text("import torch\n"
                      "class Odd(Exception):\n"
                      "    def __str__(self):\n"
                      "        raise ValueError('no')\n"
                      "x = torch.randn(2, 6).view(3, 4)\n"
                      "raise Odd()\n")
    # the console script's own steps in this process (cli_in_process): the script runs in the command's
    # process either way, and an exception the command let through would end this test too
    res = cli_in_process("trace", str(script), "--width", "200")
    assert res.returncode == 1 and "internal error" not in res.stdout + res.stderr
    assert "✗ the script raised Odd: (its message cannot be shown: str() raised ValueError)" in res.stdout
    res = cli_in_process("trace", str(script), "--json")
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1] == ("error: the script raised Odd: (its message cannot be shown: str() "
                                           "raised ValueError)")


def test_no_table_above_when_the_script_raises_before_any_op(tmp_path):
    script = tmp_path / "early.py"
    script.write_text("import torch\nraise RuntimeError('before anything')\n")
    res = cli_in_process("trace", str(script), "--width", "200")
    assert res.returncode == 1
    assert "the table above" not in res.stdout
    assert "(raised before any tensor op that shapetrace records, so there is no table)" in res.stdout


def test_deeply_nested_progress_is_set_aside(tmp_path):
    (tmp_path / "progress.json").write_text("[" * 100_000 + "]" * 100_000)
    res = cli_in_process("exercise", "list", env={"SHAPETRACE_STATE_DIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "RecursionError" not in res.stderr
    assert "nested too deeply to be a progress file" in " ".join(res.stdout.split() + res.stderr.split())
    assert not (tmp_path / "progress.json").exists() or json.loads((tmp_path / "progress.json").read_text())
    assert any(p.name.startswith("progress.json.corrupt-") for p in tmp_path.iterdir())


@pytest.mark.parametrize(("args", "line"), [
    (["run", "--nope"], "error: no such option: --nope (Possible options: --force, --ops) (see shapetrace run --help)"),
    (["nope"], "error: no such command 'nope' (see shapetrace --help)"),
    (["trace"], "error: missing argument 'script' (see shapetrace trace --help)"),
    (["exercise", "check"], "error: missing argument 'ID' (see shapetrace exercise check --help)"),
    (["run", "foo"], "error: unexpected argument 'foo': this command takes options only (see --help)"),
    (["run", "strides"], "error: unexpected argument 'strides' (did you mean --predict strides?)"),
    (["run", "--impl", "einop"], "error: --impl 'einop' is not one of: manual, einops, fused-qkv, torch, sdpa "
                                 "(did you mean einops?)"),
])
def test_typer_errors_are_one_line_like_every_other_error(args, line):
    res = cli_in_process(*args)  # (the console script's own steps, in this process: no interpreter per case)
    assert one_line(res, 2) == line
    assert "╭" not in res.stderr and res.stdout == ""


def test_bare_shapetrace_says_where_to_start():
    res = cli_in_process(env={"COLUMNS": "200"})
    assert res.returncode == 2
    assert ("Start here: shapetrace run traces a multi-head attention forward pass op by op; shapetrace lessons "
            "lists the lessons and exercises; shapetrace trace your_script.py traces your own code.") in " ".join(
                res.stdout.replace("│", " ").split())


def test_strides_says_where_h_came_from_without_heads():
    res = cli_in_process("strides", "2x6x512", "view(2,6,8,64)", env={"COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    assert "from --heads" not in res.stdout
    assert ("H = 8 heads, read from view(2, 6, 8, 64), which splits D in two (an assumption: --heads sets H)"
            in " ".join(res.stdout.split()))
    res = cli_in_process("strides", "2x6x512", "view(2,6,8,64)", "--heads", "8")
    assert "H = 8 heads from --heads" in res.stdout


def test_the_python_api_does_not_tell_users_about_dims_flags(capsys, monkeypatch):
    # in this process (no interpreter start): t.show() prints on a new console over sys.stdout, as a user's would
    import torch

    import shapetrace

    monkeypatch.setenv("COLUMNS", "200")
    with shapetrace.trace() as t:
        torch.randn(2, 6, 512).view(2, 6, 8, 64)
    t.show()
    text = " ".join(capsys.readouterr().out.split())
    assert "--dims" not in text
    assert ("Name them with shapetrace.trace(dims=\"B=2 T=6 D=512 H=8\") or with shapetrace.name(x, \"B T D\")."
            in text)


_NANOGPT_HEADS = ("import torch\n"
                  "x = torch.randn(2, 5, 8)\n"
                  "q = x.view(2, 5, 2, 4).transpose(1, 2)   # (B, H, T, d_k), nanoGPT's CausalSelfAttention\n"
                  "att = q @ q.transpose(-2, -1)            # (B, H, T, T)\n")


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_script_that_raised_is_a_cross_in_the_json_and_one_clean_line(tmp_path, where):
    # a model built with a wrong keyword (nanoGPT's GPTConfig(n_heads=...)) raises before any op; a loss
    # on a wrong target raises after them: --json's verdict said "? nothing was checked" and "✓" (after),
    # and the one-line reason carried the message's ESC and line break to the terminal
    raise_it = "raise TypeError(\"GPTConfig() got an unexpected keyword argument 'n_heads'\\x1b[2J\\nagain\")\n"
    body = raise_it + _NANOGPT_HEADS if where == "before" else _NANOGPT_HEADS + raise_it
    script = tmp_path / "raises.py"
    script.write_text(body)
    res = cli_in_process("trace", str(script), "--dims", "B=2,T=5,D=8", "--json")
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1] == ("error: the script raised TypeError: GPTConfig() got an unexpected "
                                           "keyword argument 'n_heads'[2J again")
    when = "before any recorded op" if where == "before" else "after 4 recorded ops"
    assert json.loads(res.stdout)["verdict"]["line"] == (
        "✗ the traced code raised TypeError: GPTConfig() got an unexpected keyword argument 'n_heads'[2J again "
        f"({when})")
    res = cli_in_process("trace", str(script), "--dims", "B=2,T=5,D=8", "--width", "200")
    assert res.returncode == 1 and "\x1b" not in res.stdout
    assert "✗ the script raised TypeError: GPTConfig() got an unexpected keyword argument 'n_heads'[2J again" \
        in res.stdout


def test_a_script_that_exits_with_code_0_keeps_its_check_mark(tmp_path):
    # the correct twin: sys.exit(0) at the end (a training script's early stop) is not a failure
    script = tmp_path / "exits.py"
    script.write_text(_NANOGPT_HEADS + "import sys\nsys.exit(0)\n")
    res = cli_in_process("trace", str(script), "--dims", "B=2,T=5,D=8", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verdict"]["line"] == (
        "✓ checked all 4 ops that could carry a layout bug: every axis keeps its meaning from input to output; "
        "not measured: " + NO_MODULE)
