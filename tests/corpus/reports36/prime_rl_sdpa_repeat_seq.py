"""PrimeIntellect-ai/prime-rl pull request #2681 ("Added deepseek_v3 in models", review thread on
``attention_deepseek_v3.py``, 2026-06-01): in the SDPA path, with ``q, k, v`` shaped ``(bs, sl, nkv, d)``, the
grouped-query expansion ran ``k.repeat_interleave(num_queries_per_kv, dim=1)``: that repeats the sequence, not
the kv heads ("SDPA GQA repeats sequence dim"); the expansion belongs on the head axis (``dim=2``).

The idiom (written here in torch): ``q_proj``/``k_proj``/``v_proj`` to ``(B, T, H, d)`` and ``(B, T, H_kv, d)``,
kv heads repeated for their query groups, transposed to ``(B, H, T, d)`` for
``scaled_dot_product_attention(is_causal=True)``, heads merged and ``o_proj``. With one kv head (MQA) the slip
runs silently: the keys become ``(B, 1, T * H, d)`` and broadcast over the query heads; with ``H_kv > 1`` torch
raises.

Bug (GQA repeat on the wrong axis): ``repeat-seq-dim``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("repeat-seq-dim",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=1", "B=2 T=6 D=32 H=4 H_kv=2")


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, bug=""):
        super().__init__()
        self.bug, self.n_heads, self.n_kv_heads = bug, n_heads, n_kv_heads
        self.head_dim = dim // n_heads
        self.num_queries_per_kv = n_heads // n_kv_heads
        self.q_proj = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x):
        bs, sl, _ = x.shape
        q = self.q_proj(x).view(bs, sl, self.n_heads, self.head_dim)  # (B, T, H, d_k)
        k = self.k_proj(x).view(bs, sl, self.n_kv_heads, self.head_dim)  # (B, T, H_kv, d_k)
        v = self.v_proj(x).view(bs, sl, self.n_kv_heads, self.head_dim)  # (B, T, H_kv, d_k)
        if self.num_queries_per_kv > 1:
            dim = 1 if self.bug == "repeat-seq-dim" else 2
            k = k.repeat_interleave(self.num_queries_per_kv, dim=dim)  # (B, T, H, d_k)
            v = v.repeat_interleave(self.num_queries_per_kv, dim=dim)  # (B, T, H, d_k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, d_k)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_k)
        out = out.transpose(1, 2).reshape(bs, sl, self.n_heads * self.head_dim)  # (B, T, D)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=1):
    torch.manual_seed(0)
    return Attention(D, H, H_kv, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
