"""Any locale, any ``$COLUMNS``: ASCII stand-ins where the stream cannot encode a symbol, sizes capped,
a closed standard output."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from conftest import ROOT, run_cli

from shapetrace.cli.terminal import ascii_fallback, capped_size, prepare_streams


def _ascii_stream() -> tuple[io.BytesIO, io.TextIOWrapper]:
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding="ascii", write_through=True)


def test_a_stream_that_cannot_encode_the_symbols_gets_ascii_stand_ins():
    raw, stream = _ascii_stream()
    ascii_fallback(stream)
    stream.write("✓ pass · ✗ mixed-axis: [B=2, !T·H=3] → transpose… ▶ 4·D² café\n")
    assert raw.getvalue().decode() == "ok pass - x mixed-axis: [B=2, !T*H=3] -> transpose... > 4*D^2 cafe\n"


def test_a_utf8_stream_is_left_as_it_is():
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    ascii_fallback(stream)
    stream.write("✓ T·H\n")
    assert stream.errors == "strict" and raw.getvalue().decode() == "✓ T·H\n"


@pytest.mark.parametrize("value, expected", [("100000", "1000"), ("0", "40"), ("120", "120"), ("abc", "abc"),
                                             ("", ""), ("٣٣", "٣٣"), (None, None)])
def test_columns_are_held_to_what_width_accepts(value, expected):
    assert capped_size(value, 40, 1000) == expected


def test_prepare_streams_caps_columns_and_lines(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")
    monkeypatch.setenv("LINES", "99999999")
    prepare_streams()
    import os

    assert (os.environ["COLUMNS"], os.environ["LINES"]) == ("1000", "1000")


@pytest.mark.parametrize("args", [["lessons"], ["exercise", "list"], ["lesson", "1"], ["quiz", "--count", "1"],
                                  ["strides", "2,3,4", "transpose(1,2)"]])
def test_every_command_prints_under_an_ascii_locale(args, tmp_path):
    """``PYTHONIOENCODING=ascii`` (issue 35: UnicodeEncodeError internal errors in five commands)."""
    proc = run_cli(*args, input="", env={"PYTHONIOENCODING": "ascii", "SHAPETRACE_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr and proc.stdout.isascii() and proc.stdout.strip()
    if args == ["lesson", "1"]:
        assert "Lesson 1 - Splitting D into heads" in proc.stdout
        assert "x error mixed-axis at #0" in proc.stdout


def test_a_closed_stdout_is_no_internal_error():
    proc = subprocess.run(f"{sys.executable} -m shapetrace lessons >&-", shell=True, capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""


@pytest.mark.parametrize("args", [["--version"], ["lessons", "--json"], ["lessons"]])
def test_a_reader_that_closes_the_pipe_first_ends_the_command_quietly(args, tmp_path):
    """``shapetrace lessons --json | head -c 10`` (issue 35 round 3's fuzz): a reader gone before the output
    ended gave ``internal error: BrokenPipeError`` (JSON), or exit 1 without a word (Rich's and Typer's own
    ending, as a failed run); now exit 0 and nothing more, as when the output fitted in the pipe. The
    read end is closed before the command starts, so its first write meets the closed pipe."""
    import os

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "shapetrace", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, timeout=120,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                   "SHAPETRACE_STATE_DIR": str(tmp_path)})
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")
