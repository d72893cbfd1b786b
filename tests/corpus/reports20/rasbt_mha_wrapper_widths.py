"""rasbt/LLMs-from-scratch issue #67 ("Inconsistencies in MHA Wrapper Implementation Between Chapter 3 Main
Content and Bonus Material"), fixed by pull request #68 ("Fix mha wrapper implementations in ch03 bonus",
merged; rasbt: "good catch regarding the heads and projection layer"): the bonus notebook's
``Ch03_MHA_Wrapper``, benchmarked against the fused implementations, gave each ``CausalAttention`` head the
full ``d_out`` instead of ``d_out // num_heads`` and had no output projection, so it returned ``[8, 1024,
9216]`` against the others' ``[8, 1024, 768]`` and did twelve times the work. The fix divides the width among
the heads and adds ``out_proj``.

The idiom (the book's chapter 3): ``CausalAttention`` with ``W_query``/``W_key``/``W_value``, a registered
``triu(ones, diagonal=1)`` buffer ``masked_fill_(mask.bool()[:T, :T], -inf)``, ``softmax(scores /
keys.shape[-1] ** 0.5, dim=-1)``, dropout, ``attn_weights @ values``; the wrapper ``cat([head(x) for head in
self.heads], dim=-1)`` and ``out_proj``.

Twin (argument): ``head-width-d-out``: heads of width ``d_out``, no projection: the output is ``(B, T, H·D)``.
A twin: the book's own main-chapter ``MultiHeadAttentionWrapper`` stacks ``num_heads`` heads of ``d_out``
without a projection on purpose (rasbt in PR #859: "I wanted to show that it literally combines multiple
``CausalAttention`` ones"); each head is correct attention and an output wider than the input is a design,
not something the trace can call wrong."""

import sys

import torch
from torch import nn

BUGS = ()
TWINS = ("head-width-d-out",)
DIMS = ("B=2 T=6 D=32 H=4",)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


class Ch03_MHA_Wrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, bug=""):
        super().__init__()
        self.bug = bug
        head_width = d_out if bug == "head-width-d-out" else d_out // num_heads                 # [heads]
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, head_width, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        context_vec = torch.cat([head(x) for head in self.heads], dim=-1)
        if self.bug == "head-width-d-out":
            return context_vec                                                                   # [proj]
        return self.out_proj(context_vec)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Ch03_MHA_Wrapper(D, D, 16, 0.0, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
