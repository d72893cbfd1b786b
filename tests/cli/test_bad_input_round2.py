"""A hostile round of bad input over every command (branch badin): each case got a traceback, an
"internal error", exit 0 on a failure, a wrong message or a stray file on main (33c87cf); now one line on
stderr, exit 2 for a usage error and 1 for a failed run. Every test here fails on main."""

from __future__ import annotations

import os

import pytest
from conftest import cli_forked, cli_in_process

from shapetrace.exercises.answers import parse_int, parse_shape


def one_line(res, code: int) -> str:
    assert res.returncode == code, (res.returncode, res.stdout[-500:], res.stderr[-500:])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def live_extra() -> None:
    from shapetrace.live.session import EXTRA

    for name in EXTRA:
        pytest.importorskip(name, reason="the live extra is not installed: pip install -e '.[live]'")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("import torch\nx = torch.randn(2, 6, 512)\ny = x.view(2, 6, 8, 64)\n")
    return str(path)


def test_a_superscript_digit_in_dims_is_a_usage_error(script):
    """``'²'.isdigit()`` is True but ``int('²')`` raises: on main, 'internal error: ValueError'."""
    assert one_line(cli_in_process("trace", script, "--dims", "B=²"), 2) == (
        "error: cannot read 'B=²' in dims 'B=²': write NAME=SIZE pairs such as 'B=2,T=6,D=512,H=8', or "
        "NAME:ROLE=SIZE such as 'ctx:tokens=6' (sizes are whole numbers of at least 1)")


def test_a_superscript_digit_in_a_strides_shape_is_a_usage_error():
    """On main: exit 1, 'internal error: ValueError: invalid literal for int()'."""
    assert one_line(cli_in_process("strides", "²x6", "view(12)"), 2) == (
        "error: cannot read shape '²x6': write sizes separated by x or commas, e.g. 2x6x512 or 2,6,512")


def test_quiz_answers_that_are_no_number_are_unreadable_not_a_crash():
    """A shape answer ``²x3`` (on main: 'internal error: ValueError', the quiz ended) and a byte count
    of 400 digits (a float of inf: OverflowError) are answers that cannot be read, as ``abc`` is."""
    assert parse_shape("²x3") is None and parse_shape("2x3") == (2, 3)
    assert parse_int("1" * 400) is None and parse_int("1,536 bytes") == 1536


def test_the_quiz_says_it_could_not_read_a_superscript_answer(tmp_path):
    answers = tmp_path / "answers.txt"
    answers.write_text("²x3\n")
    res = cli_in_process("quiz", "--answers-from", str(answers), "--topic", "split", "--count", "1",
                         env={"SHAPETRACE_STATE_DIR": str(tmp_path / "state")})
    assert (res.returncode, res.stderr) == (0, ""), res.stderr
    assert "? could not read '²x3'; the answer is [2, 8, 6, 64]" in res.stdout.splitlines()


def test_a_name_given_twice_in_dims_is_a_usage_error(script):
    """On main ``B=2,B=3`` kept the last size without a word."""
    assert one_line(cli_in_process("trace", script, "--dims", "B=2,B=3"), 2) == (
        "error: dims 'B=2,B=3' give B twice (B=2, then B=3): give each name once")


def test_a_time_limit_that_stops_the_script_before_any_op_is_a_failed_run(tmp_path):
    """On main: exit 0, and 'no recorded op matches --only/--include/--exclude' though no filter was given."""
    spin = tmp_path / "spin.py"
    spin.write_text("while True:\n    pass\n")
    res = cli_forked("trace", str(spin), "--time-limit", "0.2", timeout=60)
    assert (res.returncode, res.stdout) == (1, ""), res.stdout
    assert res.stderr.splitlines()[-1] == (
        f"error: {spin} made no tensor op that shapetrace records before --time-limit 0.2 stopped it: nothing "
        "to show (raise the limit, or is the model called?)")


@pytest.mark.parametrize("impls", ["", ",", " , "])
def test_compare_with_no_implementation_is_a_usage_error(impls):
    """On main: exit 0 and an empty table."""
    assert one_line(cli_in_process("compare", "--impls", impls), 2) == (
        f"error: --impls {impls!r} names no implementation: give some separated by commas, e.g. --impls "
        "manual,sdpa (choose from: manual, einops, fused-qkv, torch, sdpa)")


def test_compare_with_an_implementation_twice_is_a_usage_error():
    """On main: both ran, and 'all 2 implementations agree'."""
    assert one_line(cli_in_process("compare", "--impls", "manual, sdpa,manual"), 2) == (
        "error: --impls names manual twice: give each implementation once")


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path / "state"))
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def test_checking_a_folder_says_it_is_a_folder(workspace):
    """On main: '... does not exist: run `shapetrace exercise start split-heads` first'."""
    (workspace / "split_heads.py").mkdir()
    res = cli_in_process("exercise", "check", "split-heads", "--workspace", str(workspace))
    assert one_line(res, 2) == (
        f"error: {workspace / 'split_heads.py'} is a folder, not your exercise file: give the .py file "
        "(split_heads.py, from `shapetrace exercise start split-heads`)")


@pytest.mark.parametrize("which", ["fifo", "device"])
def test_checking_a_fifo_or_a_device_says_what_it_is(workspace, which):
    """On main both said '... does not exist: run `shapetrace exercise start split-heads` first'."""
    if which == "fifo":
        path = workspace / "split_heads.py"
        os.mkfifo(path)
        args, kind = ["--workspace", str(workspace)], "a FIFO (named pipe)"
    else:
        path, args, kind = "/dev/zero", ["--file", "/dev/zero"], "a character device"
    res = cli_in_process("exercise", "check", "split-heads", *args)
    assert one_line(res, 2) == f"error: your file {path} is {kind}, not a regular file: give a file"


def test_start_force_over_a_folder_is_refused_and_leaves_nothing_behind(workspace):
    """On main: exit 1, 'error: .../split_heads.py.tmp: Is a directory', and the .tmp copy left there."""
    (workspace / "split_heads.py").mkdir()
    res = cli_in_process("exercise", "start", "split-heads", "--force", "--workspace", str(workspace))
    assert one_line(res, 2) == (
        f"error: {workspace / 'split_heads.py'} is a folder; --force replaces your file, never a folder: move "
        "the folder away, then start again")
    assert sorted(os.listdir(workspace)) == ["split_heads.py"]


@pytest.mark.parametrize("host", ["", "  "])
def test_an_empty_host_is_refused_not_every_network(host):
    """On main ``--host ''`` listened on every network (the system reads '' as 0.0.0.0) and served the class."""
    live_extra()
    res = cli_forked("live", "--host", host, "--port", "0", timeout=30)   # (on main: TimeoutExpired)
    assert one_line(res, 2) == (
        f"error: --host {host!r} is empty: give 127.0.0.1 (this machine only) or 0.0.0.0 (every network: "
        "phones in the room)")


def test_a_csv_that_is_a_folder_says_so(tmp_path):
    """On main: '--csv DIR: the file exists', of a folder."""
    live_extra()
    res = cli_in_process("live", "--csv", str(tmp_path), "--port", "0")
    assert one_line(res, 2) == (f"error: --csv {tmp_path} is a folder; give a file name for the answers, e.g. "
                                f"{tmp_path / 'answers.csv'}")


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_script_name_says_so(name, tmp_path):
    """On main: 'error: no such script: ' with nothing after it."""
    assert one_line(cli_in_process("trace", name, cwd=tmp_path), 2) == (
        f"error: the script's name {name!r} is empty: give a Python file (shapetrace trace path/to/script.py)")


@pytest.mark.parametrize("chain, line", [
    ("view(10**100)", "error: refused argument '10 ** 100': only whole numbers, + - * // %, axis names and "
                      "tuples are allowed"),   # (on main: "refused argument BinOp")
    ("mT()", "error: mT is an attribute, not a method: write .mT without parentheses"),
    # (on main: "refused 'mT': not an allowed tensor method (allowed: ..., the attribute mT, ...)")
])
def test_a_refused_chain_says_what_was_written(chain, line):
    assert one_line(cli_in_process("strides", "2x3", chain), 2) == line


@pytest.mark.parametrize("command", ["run", "live"])
def test_an_empty_preset_is_not_known(command):
    """On main ``run --preset ''`` ran the default sizes, as if no preset were given."""
    if command == "live":
        live_extra()   # (on main it served a class: TimeoutExpired)
    res = cli_forked(command, "--preset", "", "--port", "0", timeout=30) if command == "live" else \
        cli_in_process(command, "--preset", "")
    assert one_line(res, 2) == (
        "error: --preset '' is not known; choose one of: gpt2, gpt2-xl, bert-base, bert-large, llama2-7b, "
        "llama2-70b, llama3-8b, llama3-70b, mistral-7b, falcon-7b")
