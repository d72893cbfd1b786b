"""datawhalechina/llms-from-scratch-cn issue #54 ("Coding mistake"; fixed by the commit "bug fix", 5e6ec49): the
Chinese edition of "LLMs from scratch", ``Codes/ch03/01_main-chapter-code/ch03.ipynb``, class ``CausalAttention``,
normalised its masked scores with ``torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=1)``. The reporter: with
inputs ``[batch_size, num_tokens, d_in]`` the scores are ``[batch_size, num_tokens, num_tokens]`` and "``dim=1``
cannot handle the batched case", the softmax must run over the last axis, the keys of each query (the maintainer
agreed and changed it to ``dim=-1``). With ``dim=1`` each key's column sums to one over the queries; the causal
``-inf`` above the diagonal stays, so nothing turns NaN and the shapes all agree.

The idiom (the notebook's, after rasbt's chapter 3): ``W_query``/``W_key``/``W_value`` Linears ``d_in -> d_out``
without bias, a ``block_size`` buffer ``mask = torch.triu(torch.ones(block_size, block_size), diagonal=1)``,
``attn_scores = queries @ keys.transpose(1, 2)``, ``masked_fill_(self.mask.bool()[:num_tokens, :num_tokens],
-torch.inf)``, the softmax of the scores over ``sqrt(d_out)``, dropout, ``attn_weights @ values``. One head, a
batch of two token sequences already embedded (the notebook's ``torch.stack((inputs, inputs))``, here random).

Bugs: ``softmax-dim-1`` (the reported code); ``mask-tril``: the buffer built ``torch.tril(torch.ones(...),
diagonal=-1)`` (the lower triangle hidden: each token sees itself and the later tokens, not the earlier ones).

At equal sizes (B = T = 4; ``block_size`` = T, as the notebook sets it from ``batch.shape[1]``) the correct file
gets a false ``✗ broadcast-mismatch``: the causal buffer's cut ``mask[:num_tokens, :num_tokens]`` is read ``[B, T]``
against the scores ``[B, T, T]`` (named in the round test's ``false_at_equal``)."""

import sys

import torch
from torch import nn

BUGS = ("softmax-dim-1", "mask-tril")
TWINS = ()
DIMS = ("B=2 T=6 D=32",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32"}


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, block_size, dropout, qkv_bias=False, bug=""):
        super().__init__()
        self.d_out, self.bug = d_out, bug
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        if bug == "mask-tril":
            self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size), diagonal=-1))
        else:
            self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape                                                  # (b, num_tokens, d_in)
        keys = self.W_key(x)                                                           # (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)                                   # (b, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        dim = 1 if self.bug == "softmax-dim-1" else -1
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=dim)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values                                            # (b, num_tokens, d_out)
        return context_vec


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return CausalAttention(D, D, T, 0.0, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
