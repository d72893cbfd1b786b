"""Output piped into a file or another program (issue 13): no line ends in spaces (Rich pads lines to
the width; the commands' console drops that padding when stdout is not a terminal), and the leaked
token links of a ``--break`` run are never split across lines. The commands run in this process with
stdout a pipe-like stream that is not a terminal (:func:`cli_in_process`), as ``| less`` gives them."""

from __future__ import annotations

import io
import re

import pytest
from conftest import cli_in_process

from shapetrace.cli.common import TrimmedLines

COMMANDS = [
    ("run", "--d-model", "512", "--heads", "8"),
    ("run", "--break", "skip-transpose", "--causal"),
    ("run", "--break", "no-key-transpose", "--causal"),
    ("run", "--kv-heads", "2"),
    ("compare",),
    ("lesson", "1"),
    ("strides", "2,6,512", "view(2, 6, 8, 64).transpose(1, 2).contiguous()"),
    ("exercise", "list"),
]


@pytest.mark.parametrize("width", ["80", "100"])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_no_piped_line_ends_in_spaces(args, width):
    done = cli_in_process(*args, env={"COLUMNS": width, "NO_COLOR": "1"})
    assert done.returncode in (0, 1), done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) > 5
    assert [n for n, line in enumerate(lines) if line != line.rstrip()] == []
    assert max(len(line) for line in lines) <= int(width)


@pytest.mark.parametrize("width", ["80", "100"])
def test_leaked_links_stay_on_one_line(width):
    done = cli_in_process("run", "--break", "skip-transpose", "--causal", env={"COLUMNS": width, "NO_COLOR": "1"})
    text = done.stdout
    assert "leaked: 30 (input token -> output token) links" in text and "for example:" in text
    links = re.findall(r"b\d+ t\d+ -> b\d+ t\d+", text)
    assert links == ["b0 t1 -> b0 t0", "b0 t2 -> b0 t0", "b0 t2 -> b0 t1", "b0 t3 -> b0 t0", "b0 t3 -> b0 t1",
                     "b0 t3 -> b0 t2"]
    assert not re.search(r"b\d+ t\d+\s*\n\s*->|->\s*\n|b\d+\s*\n\s*t\d+", text)


def test_trimmed_lines_keep_colour_codes_and_unfinished_lines():
    out = io.StringIO()
    stream = TrimmedLines(out)
    stream.write("a  \x1b[0m\nb   ")
    assert out.getvalue() == "a\x1b[0m\n"
    stream.write("  c \n  \n")
    stream.write("tail  ")
    stream.flush()
    assert out.getvalue() == "a\x1b[0m\nb     c\n\ntail  "


@pytest.mark.parametrize("width", ["60", "80", "100"])
def test_exercise_list_keeps_each_exercise_kind_on_its_line(width, tmp_path):
    env = {"COLUMNS": width, "NO_COLOR": "1", "SHAPETRACE_STATE_DIR": str(tmp_path)}
    done = cli_in_process("exercise", "list", env=env)
    lines = done.stdout.splitlines()
    tests = [line for line in lines if "write a test" in line]
    assert [line.split()[0] for line in tests] == ["test-split-square", "test-round-trip", "test-causal-mask",
                                                  "test-repeat-kv", "test-append-kv", "test-patchify",
                                                  "test-apply-rope", "test-fused-attention", "test-head-backward"]
    assert max(len(line) for line in lines) <= int(width)
