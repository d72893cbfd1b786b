"""shapetrace.engine.head_width: the heads' width read from the model's own head split where it is not D / H.

Models that set ``head_dim`` apart from their width (transformers' Gemma ``self.head_dim = config.head_dim``,
Qwen3-0.6B's 16 heads of 128 at D = 1024, Mistral-Nemo's 32 of 128 at D = 5120) project the queries to
``H · head_dim`` and split ``view(B, T, H, head_dim)``. With ``--dims "D=… H=…"`` only, 6e2d55a derived
d_k = D / H and could name nothing past the projections (``?``, with a note to give d_k). Every test here
fails there (``head_width`` did not exist); the verdicts are exact, at distinct sizes and with the width
equal to a head count (where nothing is read)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from shapetrace.app.script import script_header


class Qwen3Attention(nn.Module):
    """transformers' Qwen3Attention (eager, no rotary, no q/k norm): H·head_dim queries, H_kv·head_dim keys
    and values, ``repeat_kv``; ``product`` picks how queries meet keys: ``q @ kᵀ``, lucidrains' einsum, or SDPA."""

    def __init__(self, D, H, H_kv, head_dim, product="matmul"):
        super().__init__()
        self.H, self.H_kv, self.hd, self.product = H, H_kv, head_dim, product
        self.q_proj = nn.Linear(D, H * head_dim, bias=False)
        self.k_proj = nn.Linear(D, H_kv * head_dim, bias=False)
        self.v_proj = nn.Linear(D, H_kv * head_dim, bias=False)
        self.o_proj = nn.Linear(H * head_dim, D, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.hd).transpose(1, 2)            # (B, H, T, d_k)
        k = self.k_proj(x).view(B, T, self.H_kv, self.hd).transpose(1, 2)         # (B, H_kv, T, d_k)
        v = self.v_proj(x).view(B, T, self.H_kv, self.hd).transpose(1, 2)         # (B, H_kv, T, d_k)
        k = k.repeat_interleave(self.H // self.H_kv, dim=1)                       # (B, H, T, d_k)
        v = v.repeat_interleave(self.H // self.H_kv, dim=1)                       # (B, H, T, d_k)
        if self.product == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)           # (B, H, T, d_k)
        else:
            s = q @ k.transpose(-2, -1) if self.product == "matmul" \
                else torch.einsum("b h i d, b h j d -> b h i j", q, k)            # (B, H, T, T)
            y = (s * self.hd ** -0.5).softmax(-1) @ v                             # (B, H, T, d_k)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.H * self.hd))     # (B, T, D)


def _traced(model, B, T, D, dims):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model.eval()(torch.randn(B, T, D))
    return t


@pytest.mark.parametrize("product", ["matmul", "einsum", "sdpa"])
def test_the_heads_width_is_read_from_the_split_queries_and_keys_meet_over(product):
    t = _traced(Qwen3Attention(32, 4, 2, 16, product), 2, 6, 32, "B=2 T=6 D=32 H=4 H_kv=2")
    assert (t.head_width, t.dims["d_k"]) == (16, 16)
    assert [e.output.dims for e in t.events if e.op in ("linear", "view")] == [
        ("B", "T", "H*d_k"), ("B", "T", "H", "d_k"), ("B", "T", "D_kv"), ("B", "T", "H_kv", "d_k"),
        ("B", "T", "D_kv"), ("B", "T", "H_kv", "d_k"), ("B", "T", "D")]
    assert [d.kind for d in t.diagnostics] == []
    assert t.report().verdict.mark == "✓"


def test_a_head_width_at_d_over_h_or_given_is_left_as_it_is():
    t = _traced(Qwen3Attention(32, 4, 2, 8), 2, 6, 32, "B=2 T=6 D=32 H=4 H_kv=2")
    assert (t.head_width, t.dims["d_k"]) == (None, 8)
    t = _traced(Qwen3Attention(32, 4, 2, 16), 2, 6, 32, "B=2 T=6 D=32 H=4 H_kv=2 d_k=16")
    assert (t.head_width, t.dims["d_k"]) == (None, 16)
    assert t.report().verdict.mark == "✓"


def test_a_width_equal_to_a_head_count_decides_nothing():
    """``view(B, T, 4, 4)`` of 16 features at H = 4 splits as H × 4 or 4 × H: which is the heads, the split
    cannot say. Nothing is read, and nothing named from it."""
    t = _traced(Qwen3Attention(32, 4, 2, 4), 2, 6, 32, "B=2 T=6 D=32 H=4 H_kv=2")
    assert (t.head_width, t.dims["d_k"]) == (None, 8)
    assert t.report().verdict.mark == "?"


class NeoxFused(nn.Module):
    """GPT-NeoX's fused projection viewed per head as ``(B, T, H, 3·d_k)`` and cut into q, k, v
    (transformers' GPTNeoXAttention): the split's width 3·d_k is not the width q·k contracts (d_k)."""

    def __init__(self, D, H):
        super().__init__()
        self.H, self.qkv = H, nn.Linear(D, 3 * D)

    def forward(self, x):
        B, T, D = x.shape
        qkv = self.qkv(x).view(B, T, self.H, 3 * (D // self.H)).transpose(1, 2)  # (B, H, T, 3·d_k)
        q, k, v = qkv.chunk(3, dim=-1)                                           # (B, H, T, d_k) each
        return ((q @ k.transpose(-2, -1)).softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)   # (B, T, D)


def test_a_per_head_fused_split_shows_no_head_width():
    t = _traced(NeoxFused(32, 4), 2, 6, 32, "B=2 T=6 D=32 H=4")
    assert (t.head_width, t.dims["d_k"]) == (None, 8)
    assert t.events[1].output.dims == ("B", "T", "H", "3*d_k")
    assert t.report().verdict.mark == "✓"


def test_the_header_says_where_d_k_came_from():
    assert script_header("m.py", {"B": 2, "T": 6, "D": 32, "H": 4}, head_width=16)[1] == (
        "d_k = 16: the width of each head as the model splits its projections, not D / H = 32 / 4 (give d_k "
        "with --dims to say so yourself)")
    assert script_header("m.py", {"B": 2, "T": 6, "D": 32, "H": 4})[1] == "d_k = D / H = 32 / 4 = 8"
