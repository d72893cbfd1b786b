"""shapetrace/app/script.py: what a traced script's run says about the sizes given with --dims."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import cli_in_process

SCRIPT = str(Path(__file__).parents[1] / "scripts" / "annotated_four_heads.py")   # x: (B=2, T=8, D=64)


@pytest.mark.parametrize("T", [6, 4], ids=["distinct", "T=H"])
def test_a_wrong_token_count_is_said_under_the_verdict(T):
    """Issue 35: a wrong T said nothing of the mismatch (the Annotated Transformer, 8 tokens)."""
    res = cli_in_process("trace", SCRIPT, "--dims", f"B=2,T={T},D=64,H=4", "--width", "200")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("? "))
    note = (f"i --dims T={T}, but the input [2, 8, 64] has 8 tokens (B=2 and D=64 are where --dims puts them): "
            "did you mean T=8?")
    assert note in lines[verdict + 1:]
    assert sum(note in line for line in lines) == 1


def test_the_right_token_count_says_nothing_of_the_sizes():
    res = cli_in_process("trace", SCRIPT, "--dims", "B=2,T=8,D=64,H=4", "--width", "200")
    assert res.returncode == 0, res.stderr
    assert "did you mean" not in res.stdout and res.stdout.rstrip().splitlines()[-1].startswith("✓ ")


def test_heads_written_as_modules_use_h_through_d_k():
    """Karpathy's per-head modules (tests/corpus/reports2/karpathy_head_scale.py): no axis has H entries, but each
    head's width is d_k = D / H, named by engine/infer/module_heads, so H named axes and the note ``--dims H=4
    matches no axis ... no axis in the table is named from it`` would be false. On eefe532 the note was printed
    (the widths unnamed); a size that names nothing (X=13) still gets it."""
    script = str(Path(__file__).parents[1] / "corpus" / "reports2" / "karpathy_head_scale.py")
    res = cli_in_process("trace", script, "--dims", "B=2,T=6,D=32,H=4,X=13", "--width", "200")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.rstrip().splitlines()
    assert lines[-1] == ("i --dims X=13 matches no axis of any recorded tensor: the script does not use that size, "
                         "so no axis in the table is named from it")
    assert any(line.startswith("✓ checked all 38 ops") for line in lines)


def test_a_model_that_appends_its_own_token_gets_no_token_count_question():
    """RUCAIBox/RecBole's BERT4Rec (tests/corpus/reports41/recbole_bert4rec_gather_index.py) appends a mask column
    to its ids ``[2, 6]``: the first 3-D tensor is ``[2, 7, 32]``, and the note asked "did you mean T=7?" where T=6
    is right (the ids that entered are ``[B, T]``)."""
    script = str(Path(__file__).parents[1] / "corpus" / "reports41" / "recbole_bert4rec_gather_index.py")
    res = cli_in_process("trace", script, "--dims", "B=2,T=6,D=32,H=4", "--width", "200")
    assert res.returncode == 0, res.stderr
    assert "did you mean" not in res.stdout and "has 7 tokens" not in res.stdout
