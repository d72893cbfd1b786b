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


def _dynamic_kernels(undo: bool):
    """ConvBERT's span convolution (tests/corpus/public36/convbert): each (entry, token, head) row of three taps
    ``[B, T, H·d_k, k]`` folded ``[B·T·H, d_k, k]`` and multiplied by its own kernel ``[B·T·H, k, 1]`` (given
    unnamed here, as ConvBERT's are left), then viewed back ``[B, T, D]`` (``undo``), or summed over its features
    with the fold kept."""
    B, T, D, H, k = 2, 6, 32, 4, 3
    torch.manual_seed(0)
    x, kernels = torch.randn(B, T, D), torch.randn(B * T * H, k, 1)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        taps = torch.stack([x.roll(1, 1), x, x.roll(-1, 1)], -1)                     # (B, T, D, k)
        rows = taps.reshape(-1, D // H, k)                                           # (B·T·H, d_k, k)
        out = rows @ kernels.softmax(dim=1)                                          # (B·T·H, d_k, 1)
        out.reshape(B, T, D) if undo else out.sum(-1)
    return t


def test_a_fold_that_leads_a_batched_product_and_is_undone_is_a_batch():
    """On eefe532 the fold ``[B·T·H, d_k, k]`` was a ``tokens-merged-with-features`` warning (ConvBERT's correct
    file ``!``); a batched product computes each entry on its own and the result is viewed back at once: silent,
    and ``?`` (the kernels' ops have unnamed axes), never ``✓``."""
    t = _dynamic_kernels(undo=True)
    fold = next(e for e in t.events if e.op == "reshape" and e.outputs[0].dims[1:] == ("d_k", None))
    assert fold.outputs[0].dims[0] == "B*T*H"
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.mark == "?"


def test_a_fold_that_leads_a_product_but_is_kept_keeps_its_warning():
    t = _dynamic_kernels(undo=False)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == \
        [("warning", "tokens-merged-with-features")]


def _masked_rows(then: str):
    """d2l's ``masked_softmax`` (tests/corpus/public38/d2l_mha): the scores ``[B·H, T, T]`` viewed ``[B·H·T, T]``,
    each query's row filled past its sequence's length, then viewed back (``then="undo"``), or summed over the
    keys with the fold kept (``"sum"``), or viewed back after a sum across the rows (``"mix"``)."""
    B, T, D, H = 2, 6, 32, 4
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        shapetrace.name(x, "B T D")
        q = x.reshape(B, T, H, -1).permute(0, 2, 1, 3).reshape(B * H, T, -1)        # (B·H, T, d_k)
        scores = torch.bmm(q, q.transpose(1, 2))                                     # (B·H, T, T)
        rows = scores.reshape(-1, T)                                                 # (B·H·T, T)
        rows[torch.arange(T)[None, :].expand(B * H * T, T) >= 4] = -1e6
        if then == "undo":
            rows.reshape(B * H, T, T).softmax(dim=-1)
        elif then == "sum":
            rows.sum(-1)
        else:
            (rows + rows.flip(0)).reshape(B * H, T, T)
    return t


def test_rows_filled_in_place_and_viewed_back_are_a_round_trip():
    """On 5774b39 (main) the fold ``[B·H·T, T]`` was a ``tokens-merged-with-features`` warning (the correct
    tests/corpus/public38/d2l_mha ended ``!``); only a fill entry by entry reads it before it is viewed back: silent."""
    t = _masked_rows("undo")
    fold = next(e for e in t.events if e.op == "reshape" and len(e.outputs[0].dims) == 2)
    assert fold.outputs[0].dims == ("B*H*T", "T")
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == []


@pytest.mark.parametrize("then", ["sum", "mix"])
def test_rows_reduced_or_mixed_before_they_are_viewed_back_keep_the_warning(then):
    t = _masked_rows(then)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")] == \
        [("warning", "tokens-merged-with-features")]
