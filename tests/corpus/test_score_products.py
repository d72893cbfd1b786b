"""A table of the scores' own shape multiplied onto them is read as a mask (issue 33 item 4).

RetNet's retention weighs ``q @ kᵀ`` by a decay table that is zero after each query (its causal mask);
syncdoth/RetNet (retnet/modeling_retnet.py, ``RetNetRelPos.get_parallel_decay_mask`` and
``MultiScaleRetention.parallel_retention``) builds it per sequence, ``decay_mask = tril(decay ** (i - j))
* retention_mask.float().view(-1, 1, 1, T)``, ``[B, H, T, T]``, and multiplies ``retention = retention *
decay_mask``: a product of two tensors of one shape. Before, only a product that broadcasts was recorded
(torchscale's ``[H, T, T]`` decay against ``[B, H, T, T]``: stop 46), so the decay laid on the future
(``triu`` for ``tril``) went unread and the run ended ``✓``. Now a product of one shape whose last two
axes have more than one entry is recorded with both operands' values kept, and where one operand is
the scores the other is read as a table over their queries and keys, as a broadcast one is
(:func:`.directions.multiplied_facts`): its zeros are a mask's hidden keys.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


class ParallelRetention(nn.Module):
    """syncdoth/RetNet ``parallel_retention`` with ``get_parallel_decay_mask`` (one decay per head, the
    ``retention_mask`` of each sequence folded in); ``bug="decay-future"``: ``torch.triu`` for
    ``torch.tril``, the future retained and the past dropped."""

    def __init__(self, dim: int, heads: int, bug: str = ""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.register_buffer("decay", 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float)), persistent=False)

    def decay_mask(self, retention_mask):
        B, T = retention_mask.shape
        index = torch.arange(T)
        time_diff = (index[:, None] - index[None, :]).float()                  # (T, S)
        decay = self.decay.view(1, -1, 1, 1) ** time_diff                      # (1, H, T, S)
        decay = torch.triu(decay) if self.bug == "decay-future" else torch.tril(decay)  # [decay]
        return decay * retention_mask.float().view(B, 1, 1, T)                 # (B, H, T, S)

    def forward(self, x, retention_mask):
        B, T, D = x.shape
        H = self.heads
        q = self.q_proj(x).view(B, T, H, D // H).transpose(1, 2)               # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, H, D // H).transpose(1, 2)               # (B, H, T, d_k)
        v = self.v_proj(x).view(B, T, H, D // H).transpose(1, 2)               # (B, H, T, d_k)
        retention = q @ k.transpose(-1, -2) * k.size(-1) ** -0.5               # (B, H, T, S)
        retention = retention * self.decay_mask(retention_mask)                # (B, H, T, S) [weigh]
        out = retention @ v                                                    # (B, H, T, d_k)
        return out.transpose(1, 2).reshape(B, T, D)                            # (B, T, D)


def _trace(bug: str, dims: str):
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    B, T, D, H = (sizes[k] for k in "BTDH")
    torch.manual_seed(0)
    model, x = ParallelRetention(D, H, bug).eval(), torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        model(x, torch.ones(B, T))
    return t


SIZES = ["B=2 T=6 D=32 H=4", "B=1 T=6 D=32 H=4", "B=4 T=4 D=16 H=4"]


@pytest.mark.parametrize("dims", SIZES)
def test_a_decay_of_the_scores_shape_laid_on_the_future_is_a_reversed_mask(dims):
    t = _trace("decay-future", dims)
    weigh = next(e for e in t.events if e.op == "mul" and e.params.get("hides"))
    assert weigh.output.dims == ("B", "H", "T", "T")
    assert [a.role for a in weigh.output.axes][-2:] == ["query", "key"]
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == [("error", "causal-mask-reversed")]
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.event == weigh.index
    assert d.message.startswith(f"mul #{weigh.index} hides, along the keys (axis -1, T) of the scores [B=")
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize("dims", SIZES)
def test_a_causal_decay_of_the_scores_shape_is_read_and_silent(dims):
    t = _trace("", dims)
    weigh = next(e for e in t.events if e.op == "mul" and e.params.get("hides"))
    assert weigh.params.get("hides_side") == "future"
    assert [d for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.mark != "✗"


def test_a_product_of_one_shape_that_is_no_table_over_the_scores_gets_no_row():
    """A gated unit's ``silu(a) * b`` (Llama's MLP) multiplies two tensors of one shape, neither the scores:
    names pass on as before, no row."""
    a, b = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6") as t:
        shapetrace.name(a, "B T F")
        shapetrace.name(b, "B T F")
        y = torch.nn.functional.silu(a) * b                                  # (B, T, F)
        y.sum(-1)
    assert [e.op for e in t.events] == ["sum"]
    assert t.events[-1].inputs[0].dims == ("B", "T", "F")


class MultipliedPadding(nn.Module):
    """A 0/1 key padding mask multiplied onto the retention scores at their own shape, as syncdoth/RetNet folds
    ``retention_mask.float().view(B, 1, 1, T)`` into its decay, here expanded first (``expand(B, H, T, T)``);
    ``on_queries``: ``view(B, 1, T, 1)``, the padding laid on the queries."""

    def __init__(self, dim: int, heads: int, on_queries: bool = False):
        super().__init__()
        self.heads, self.on_queries = heads, on_queries
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, keep):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d_k)
        mask = keep.view(B, 1, T, 1) if self.on_queries else keep.view(B, 1, 1, T)
        retention = q @ k.transpose(-1, -2)                                                    # (B, H, T, S)
        return (retention * mask.expand(B, self.heads, T, T)) @ v                              # (B, H, T, d_k)


@pytest.mark.parametrize("on_queries", [False, True])
@pytest.mark.parametrize("dims", SIZES)
def test_a_multiplied_mask_of_the_scores_shape_that_drops_nothing_is_not_checked(dims, on_queries):
    """Nothing padded: the mask is all ones, so its values say nothing of where it lands, and its expanded
    axes are not both named: ``?`` with ``mask-unexercised`` either way (before: no row, not read at all)."""
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    B, T, D, H = (sizes[k] for k in "BTDH")
    x, keep = torch.randn(B, T, D), torch.ones(B, T)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(keep, "B T")
        MultipliedPadding(D, H, on_queries).eval()(x, keep)
    (weigh,) = [e for e in t.events if e.op == "mul"]
    assert weigh.params.get("passes_all") is True and weigh.params.get("hides") is False
    assert [d.kind for d in t.diagnostics if d.severity == "note"] == ["mask-unexercised"]
    assert [d for d in t.diagnostics if d.severity != "note"] == []
    assert t.report().verdict.mark == "?"
