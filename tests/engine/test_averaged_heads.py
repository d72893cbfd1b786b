"""engine/rules/averaged_heads.py: a ``mean`` over the heads of the heads' attention outputs is a warning that
says what it computes (graph attention's output layer averages its heads on purpose); a ``sum`` over them, or a
mean of q over the heads before attention, stays an error. Tiny sizes, one graph of N nodes, no batch, as
pytorch-GAT's dense layer (tests/corpus/headsmean/gat_ppi_dense.py)."""

from __future__ import annotations

import pytest
import torch

import shapetrace


def _gat(reduce: str, N=5, D=12, H=3):
    """``proj.view(N, H, d_k)``, a softmax over the neighbours, ``bmm``, the heads back beside the nodes, then
    ``reduce``: the heads averaged (GAT's output layer), summed, or q averaged over the heads before attention."""
    torch.manual_seed(0)
    x, proj_layer = torch.randn(N, D), torch.nn.Linear(D, D, bias=False)
    with torch.no_grad(), shapetrace.trace(dims=f"T={N} D={D} H={H}") as t:
        shapetrace.name(x, "T D")
        proj = proj_layer(x).view(N, H, D // H)                            # (N, H, d_k)
        heads = proj.transpose(0, 1)                                       # (H, N, d_k)
        if reduce == "mean-q":
            heads = heads - heads.mean(dim=0, keepdim=True)                # (H, N, d_k)
        att = torch.softmax(heads @ heads.transpose(1, 2), dim=-1)         # (H, N, N)
        out = torch.bmm(att, heads).permute(1, 0, 2)                       # (N, H, d_k)
        if reduce in ("mean", "sum"):
            getattr(out, reduce)(dim=1)                                    # (N, d_k)
        elif reduce == "mean-next-q":
            q2 = proj_layer(out.reshape(N, D)).view(N, H, D // H)        # (N, H, d_k): the next layer's q
            q2.mean(dim=1)                                                 # (N, d_k)
        elif reduce == "mean-nodes":
            out.mean(dim=0)                                                # (H, d_k)
        else:
            out.reshape(N, D).mean(dim=0)                                  # (D,): a readout of the merged heads
    return t


def _found(t):
    return [(d.severity, d.kind) for d in t.diagnostics if d.severity in ("error", "warning")]


def test_a_mean_of_the_heads_outputs_over_the_heads_is_a_warning_not_an_error():
    """Fails on 32d4522 (main): ``error reduction-over-wrong-axis`` on GAT's correct output layer."""
    t = _gat("mean")
    assert _found(t) == [("warning", "heads-averaged")]
    (d,) = [d for d in t.diagnostics if d.kind == "heads-averaged"]
    assert "averages the 3 heads' outputs" in d.message and "right only where the model means to average" \
        in d.message
    assert t.report().verdict.mark == "!"


@pytest.mark.parametrize(("reduce", "want"), [
    ("concat", []),                                                    # the heads merged side by side: silent
    ("sum", [("error", "reduction-over-wrong-axis")]),                 # a sum scales by H: no averaged ensemble
    ("mean-q", [("error", "reduction-over-wrong-axis")]),              # heads collapsed before attention
    ("mean-next-q", [("error", "reduction-over-wrong-axis")]),         # the same in a next layer (after a projection)
])
def test_its_twins_keep_their_outcome(reduce, want):
    assert _found(_gat(reduce)) == want


def test_a_mean_of_the_heads_outputs_over_the_nodes_heads_kept_apart_is_never_a_check_mark():
    """Fails on 32d4522 (main): GAT's ``mean(dim=1)`` written ``mean(dim=0)`` (the nodes averaged, each head apart)
    got ``✓``. A readout per head computes the same, so it is a note and ``?``; the merged heads' readout
    (``reshape(N, D).mean(0)``) stays silent."""
    t = _gat("mean-nodes")
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "pooled-per-head")]
    assert t.report().verdict.mark == "?"
    assert [d.kind for d in _gat("concat").diagnostics] == []
