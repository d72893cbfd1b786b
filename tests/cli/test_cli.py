"""The command line as a user meets it: output, JSON, exit codes, clear errors."""

from __future__ import annotations

import json

import pytest
from conftest import cli_forked, cli_in_process


def test_run_prints_header_table_footer(cli):
    result = cli("run", "--d-model", "512", "--heads", "8", "--width", "100")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "d_k = D / H = 512 / 8 = 64" in out
    assert "4·512² + 4·512 = 1,050,624" in out
    assert "[B=2, H=8, T=6, d_k=64]         (3072, 64, 512, 1)" in out
    assert "copies 6,144 elements (24 KiB)" in out
    assert "17 ops · 9 views · 4 copies (96 KiB)" in out
    assert " ".join(out.split()).endswith(
        "✓ checked all 16 ops that could carry a layout bug: every axis keeps its meaning from input to output; "
        "held on the values: batch entries stay apart, each token depends on itself, heads stay apart")
    assert "Traceback" not in out


def test_totals_count_torchs_hidden_copies_and_say_whose_they_are(cli):
    """The matmuls clone 3 operands (72 KiB) before bmm: the totals count them with the code's own copy
    and say they are torch's. Before, the footer said "1 copy (24 KiB)"."""
    result = cli("run", "--width", "200")
    lines = result.output.splitlines()
    at = lines.index("17 ops · 9 views · 4 copies (96 KiB) · 7 computed buffers (124 KiB)")
    assert lines[at + 1] == ("3 of the 4 copies (72 KiB) are torch's, not the code's: matmul #10, #12 clone "
                             "operands for bmm")


def test_one_hidden_copy_alone_is_the_copy(tmp_path):
    script = tmp_path / "one.py"
    script.write_text("import torch\n"
                      "a = torch.randn(2, 3, 4, 5).transpose(0, 1)\n"
                      "b = torch.randn(3, 2, 5, 6)\n"
                      "c = a @ b\n")
    res = cli_in_process("trace", str(script), "--width", "200")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("2 ops · "))
    assert lines[at] == "2 ops · 1 view · 1 copy (480 B) · 1 computed buffer (576 B)"
    assert lines[at + 1] == ("the copy (480 B) is torch's, not the code's: matmul #1 clones an operand for bmm")


def test_run_json_is_pure_json_and_matches_trace(cli):
    result = cli("run", "--json", "--seq-len", "8", "--heads", "8", "--d-model", "64")
    data = json.loads(result.output)
    assert data["dims"] == {"B": 2, "T": 8, "D": 64, "H": 8, "d_k": 8}
    assert [e["op"] for e in data["events"]][:3] == ["linear", "view", "transpose"]
    assert data["events"][2]["output"] == {"shape": [2, 8, 8, 8], "stride": [512, 8, 64, 1],
                                           "dims": ["B", "H", "T", "d_k"], "contiguous": False,
                                           "storage_offset": 0, "dtype": "float32"}


@pytest.mark.parametrize("args,needle", [
    (["--d-model", "500"], "8 does not divide 500: --heads must divide --d-model (d_k = D / H); "
                           "heads that divide 500 near 8: 5, 10"),
    (["--d-model", "100000000000000000001", "--heads", "2"],
     "--d-model 100000000000000000001 is too large: sizes go up to 2**40"),
    (["--heads", "1000"], "--heads 1000 is more than --d-model 512"),
    (["--heads", "0"], "--heads must be a whole number of at least 1, got 0"),
    (["--batch", "-3"], "--batch must be a whole number of at least 1, got -3"),
    (["--seq-len", "0"], "--seq-len must be a whole number of at least 1"),
])
def test_bad_sizes_exit_2_with_one_clear_line(args, needle):
    proc = cli_in_process("run", *args)
    assert proc.returncode == 2
    assert needle in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_non_integer_is_a_usage_error():
    proc = cli_in_process("run", "--heads", "eight")
    assert proc.returncode == 2
    assert "'eight' is not a valid int" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_traceback_flag_shows_the_traceback():
    proc = cli_forked("run", "--d-model", "500", "--traceback")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "UsageError" in proc.stderr


def test_help_runs_as_a_real_module_and_lists_commands():
    proc = cli_in_process("--help")
    assert proc.returncode == 0
    assert "run" in proc.stdout and "Usage" in proc.stdout


def test_no_colour_when_piped_or_no_color():
    proc = cli_in_process("run", env={"NO_COLOR": "1"})
    assert proc.returncode == 0 and "\x1b[" not in proc.stdout
    proc = cli_in_process("run")
    assert "\x1b[" not in proc.stdout


def test_version_answers_without_a_command():
    """``--version`` is advertised by --help: it prints the installed version and exits 0."""
    out = cli_in_process("--version")
    assert out.returncode == 0 and out.stdout.startswith("shapetrace ") and out.stderr == ""
    from importlib.metadata import version

    import shapetrace

    assert out.stdout.strip() == f"shapetrace {version('shapetrace')}" == f"shapetrace {shapetrace.__version__}"
