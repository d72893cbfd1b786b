"""engine/rules/row_folds.py: a fold of tokens with heads that a product reads as a batch (every operand and the
result keep it) while it attends along another token axis is a batch, not a (token, feature) merge. The corpus
side (GPT-BigCode's rows) is tests/corpus/test_row_folds.py."""

from __future__ import annotations

import pytest
import torch

import shapetrace

DIMS = ["B=2 Wp=5 Hp=3 D=32 H=4", "B=4 Wp=4 Hp=4 D=32 H=4"]


def _axial(dims: str, attend: bool):
    """lucidrains/axial-attention's ``SelfAttention`` on ``[B·Wp, Hp, D]`` (the width folded into the batch by
    ``PermuteToFrom``): heads merged into the batch, ``[B·Wp·H, Hp, d_k]``; then attention along ``Hp``
    (``attend``), or only a sum over each head's features."""
    sizes = dict(kv.split("=") for kv in dims.split())
    B, Wp, Hp, D, H = (int(sizes[k]) for k in ("B", "Wp", "Hp", "D", "H"))
    x = torch.randn(B, Wp, Hp, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B Wp Hp D")
        rows = x.reshape(-1, Hp, D)                                                  # (B·Wp, Hp, D)
        q = rows.reshape(B * Wp, -1, H, D // H).transpose(1, 2).reshape(B * Wp * H, -1, D // H)
        if attend:
            dots = torch.einsum("bie,bje->bij", q, q).softmax(dim=-1)               # (B·Wp·H, Hp, Hp)
            torch.einsum("bij,bje->bie", dots, q)
        else:
            q.sum(-1)
    return t


@pytest.mark.parametrize("dims", DIMS)
def test_heads_folded_with_the_batch_and_an_unattended_grid_axis_are_a_batch(dims):
    """On 062deef (main) the fold ``[B·Wp·H, Hp, d_k]`` was a ``tokens-merged-with-features`` warning
    (tests/corpus/public24/axial_attention correct: ``!``); the products keep it as their batch and attend along
    ``Hp``: silent."""
    t = _axial(dims, attend=True)
    fold = next(e for e in t.events if e.op == "reshape" and len(e.outputs[0].dims) == 3 and e.index > 0
                and "H" in e.outputs[0].dims[0])
    assert fold.outputs[0].dims == ("B*Wp*H", "Hp", "d_k")
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_the_same_fold_that_no_product_attends_through_keeps_its_warning():
    t = _axial(DIMS[0], attend=False)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == \
        [("warning", "tokens-merged-with-features")]
