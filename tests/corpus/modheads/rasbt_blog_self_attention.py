"""Sebastian Raschka, "Understanding and Coding Self-Attention, Multi-Head Attention, Cross-Attention, and
Causal-Attention in LLMs" (Ahead of AI, 2024; rasbt/LLMs-from-scratch ch03 bonus material): ``SelfAttention`` holds
its weights as parameters, ``self.W_query = nn.Parameter(torch.rand(d_in, d_out_kq))`` (and ``W_key``,
``W_value``), ``keys = x @ self.W_key``, ``attn_scores = queries @ keys.T``, ``torch.softmax(attn_scores /
self.d_out_kq**0.5, dim=-1)``, ``attn_weights @ values``; ``MultiHeadAttentionWrapper`` stacks ``num_heads`` of
them in an ``nn.ModuleList`` and returns ``torch.cat([head(x) for head in self.heads], dim=-1)``. As in the post,
one unbatched sequence ``x [T, d_in]``; here ``d_out_kq = d_out_v = d_in // num_heads``.

Bugs (argument): ``cat-on-tokens``: ``torch.cat(..., dim=0)`` (the heads' outputs stacked under one another,
``[H·T, d_k]``: the slip of a batched ``dim=1`` kept for an unbatched input); ``one-head-for-all``: ``out =
self.heads[0](x)`` joined ``num_heads`` times (each head computed from the first one's weights)."""

import sys

import torch
from torch import nn

BUGS = ("cat-on-tokens", "one-head-for-all")
TWINS = ()
DIMS = ("T=6 D=32 H=4",)


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v):
        super().__init__()
        self.d_out_kq = d_out_kq
        self.W_query = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out_v))

    def forward(self, x):
        keys = x @ self.W_key                                                      # (T, d_k)
        queries = x @ self.W_query                                                 # (T, d_k)
        values = x @ self.W_value                                                  # (T, d_v)
        attn_scores = queries @ keys.T                                             # (T, T)
        attn_weights = torch.softmax(attn_scores / self.d_out_kq**0.5, dim=-1)
        return attn_weights @ values                                               # (T, d_v)


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v, num_heads, bug=""):
        super().__init__()
        self.heads = nn.ModuleList([SelfAttention(d_in, d_out_kq, d_out_v) for _ in range(num_heads)])
        self.bug = bug

    def forward(self, x):
        if self.bug == "one-head-for-all":
            out = self.heads[0](x)
            return torch.cat([out] * len(self.heads), dim=-1)
        return torch.cat([head(x) for head in self.heads], dim=0 if self.bug == "cat-on-tokens" else -1)


def build(bug="", T=6, D=32, H=4):
    torch.manual_seed(0)
    return MultiHeadAttentionWrapper(D, D // H, D // H, H, bug).eval(), (torch.randn(T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
