"""Tokens folded with heads into the rows of a product against one key/value head are batched rows, not
(token, feature) merges (engine/rules/row_folds.py). GPT-BigCode's multi-query ``_attn`` with the dims
declaring ``H_kv=1``: 344af9b ended the correct file ``!`` with two ``tokens-merged-with-features``
warnings (on ``query.reshape(B, T * H, d_k)`` and on the weights folded for ``bmm``). A fold that is never
undone, or whose keys have heads of their own, keeps its warning (the teaching aid of
tests/engine/test_diagnose_merges.py stays)."""

from __future__ import annotations

import pytest
import torch

import shapetrace
from tests.corpus.public6 import bigcode_mqa

MQA = ["B=2 T=6 D=32 H=4 H_kv=1", "B=4 T=4 D=32 H=4 H_kv=1"]


def _traced(bug: str, dims: str):
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split()) if k in ("B", "T", "D", "H")}
    model, inputs = bigcode_mqa.build(bug, **sizes)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(*inputs)
    return t


def _findings(t) -> list[tuple[str, str]]:
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")]


@pytest.mark.parametrize("dims", MQA)
def test_bigcode_query_heads_folded_against_one_key_head_are_silent(dims):
    t = _traced("", dims)
    assert _findings(t) == []
    fold = next(e for e in t.events if e.op == "reshape")
    assert fold.outputs[0].dims == ("B", "T*H", "d_k")
    assert t.report().verdict.line[0] == ("✓" if dims == MQA[0] else "?")


def test_bigcode_rows_read_heads_first_keep_the_fold_warning():
    # the fold is not undone: the scores are viewed (B, H, T, S) from token-major rows
    t = _traced("heads-first", MQA[0])
    # (two mixed-axis until 48917dd: the second is a view of the first's mix, folded into it since; the projection
    # over the mixed rows it explained is now said on its own)
    assert _findings(t) == [("error", "mixed-axis"), ("error", "projection-over-tokens"),
                            ("warning", "tokens-merged-with-features")]


@pytest.mark.parametrize("dims", ["B=2 T=6 H=4 d_k=8", "B=4 T=4 H=4 d_k=8"])
def test_a_fold_against_keys_folded_with_their_heads_keeps_its_warning(dims):
    """q and k both folded ``(B, T·H, d_k)``: every (token, head) row meets every other head's keys."""
    b, t_ = (2, 6) if "B=2" in dims else (4, 4)
    q, k = torch.randn(b, t_, 4, 8), torch.randn(b, t_, 4, 8)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(q, "B T H d_k")
        shapetrace.name(k, "B T H d_k")
        qf, kf = q.reshape(b, t_ * 4, 8), k.reshape(b, t_ * 4, 8)
        (qf @ kf.transpose(1, 2)).view(b, t_, 4, t_ * 4)
    assert ("warning", "tokens-merged-with-features") in _findings(t)


@pytest.mark.parametrize("dims", ["B=2 T=6 H=4 d_k=8", "B=4 T=4 H=4 d_k=8"])
def test_a_fold_against_one_key_head_undone_at_once_is_silent(dims):
    """The mechanism alone: ``(B, T·H, d_k) @ (B, d_k, S)`` viewed back ``(B, T, H, S)``."""
    b, t_ = (2, 6) if "B=2" in dims else (4, 4)
    q, k = torch.randn(b, t_, 4, 8), torch.randn(b, t_, 8)
    with shapetrace.trace(dims=dims) as t:
        shapetrace.name(q, "B T H d_k")
        shapetrace.name(k, "B T d_k")
        (q.reshape(b, t_ * 4, 8) @ k.transpose(1, 2)).view(b, t_, 4, t_)
    assert _findings(t) == []
