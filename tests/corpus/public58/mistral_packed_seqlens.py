"""mistralai/mistral-inference, ``src/mistral_inference/transformer.py`` and ``transformer_layers.py`` as of v1 (the
same code trains in mistralai/mistral-finetune, ``model/transformer.py``): ``Transformer.forward(input_ids,
seqlens)`` over a packed batch, every sequence laid end to end on one token axis ``[sum(seqlens), D]``;
``positions_from_sizes(seqlens)`` (``reduce(operator.iadd, [list(range(s)) for s in sizes], [])``: each sequence
counts from 0), ``freqs_cis[positions]``, and xformers' ``BlockDiagonalCausalMask.from_seqlens(seqlens)`` (causal
inside each sequence, nothing across them); ``Attention.forward``: ``wq``/``wk``/``wv`` viewed ``(seqlen_sum,
n_heads, head_dim)`` / ``(seqlen_sum, n_kv_heads, head_dim)``, ``apply_rotary_emb`` on complex pairs,
``repeat_kv`` by ``repeat_interleave(repeats, dim=1)``, ``memory_efficient_attention(xq[None, ...], key[None, ...],
val[None, ...], mask)`` and ``wo(output.view(seqlen_sum, -1))``. Here xformers' two pieces are written out in torch
(``BlockDiagonalCausalMask.materialize`` to an additive ``[M, M]`` bias, the attention on ``[1, M, H, K]``);
sequences packed (``N = B·T`` tokens, lengths ``T + 1``, ``T - 1``, then ``T``).

Bugs: ``positions-not-reset``: ``positions = torch.arange(seqlen_sum)`` (one count over the whole pack: every
sequence after the first is rotated as if it continued the one before); ``causal-across-sequences``: a plain causal
mask over the pack (``LowerTriangularMask``: each sequence attends to the sequences packed before it);
``repeat-kv-tiled``: ``keys.repeat(1, repeats, 1)`` (query head h reads key head h mod n_kv_heads, not h //
repeats)."""

import operator
import sys
from functools import reduce

import torch
from torch import nn


def positions_from_sizes(sizes):
    return torch.tensor(reduce(operator.iadd, [list(range(s)) for s in sizes], []), dtype=torch.long)


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    freqs = torch.outer(torch.arange(end), freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)                                 # (end, head_dim/2)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))           # (M, H, head_dim/2)
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis[:, None, :]                                                 # (M, 1, head_dim/2)
    return torch.view_as_real(xq_ * freqs_cis).flatten(-2), torch.view_as_real(xk_ * freqs_cis).flatten(-2)


class BlockDiagonalCausalMask:
    def __init__(self, seqlens, block_diagonal=True):
        self.seqlens, self.block_diagonal = seqlens, block_diagonal

    @classmethod
    def from_seqlens(cls, seqlens):
        return cls(seqlens)

    def materialize(self, shape):
        total = sum(self.seqlens)
        seq_ids = torch.repeat_interleave(torch.arange(len(self.seqlens)), torch.tensor(self.seqlens))
        allowed = torch.ones(total, total, dtype=torch.bool).tril()
        if self.block_diagonal:
            allowed = allowed & (seq_ids[:, None] == seq_ids[None, :])
        bias = torch.zeros(total, total).masked_fill(~allowed, float("-inf"))
        return bias.expand(shape)                                                     # (M, M)


def memory_efficient_attention(query, key, value, attn_bias):
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)      # (1, H, M, K)
    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5 + attn_bias.materialize((q.size(2), k.size(2)))
    return (scores.softmax(dim=-1) @ v).transpose(1, 2).contiguous()                  # (1, M, H, K)


def repeat_kv(keys, values, repeats, dim, bug=""):
    if bug == "repeat-kv-tiled":
        return keys.repeat(1, repeats, 1), values.repeat(1, repeats, 1)
    keys = torch.repeat_interleave(keys, repeats=repeats, dim=dim)                    # (M, H, head_dim)
    values = torch.repeat_interleave(values, repeats=repeats, dim=dim)
    return keys, values


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, bug=""):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim, self.bug = n_heads, n_kv_heads, dim // n_heads, bug
        self.repeats = n_heads // n_kv_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x, freqs_cis, mask):
        seqlen_sum, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(seqlen_sum, self.n_heads, self.head_dim)                         # (M, H, head_dim)
        xk = xk.view(seqlen_sum, self.n_kv_heads, self.head_dim)                      # (M, H_kv, head_dim)
        xv = xv.view(seqlen_sum, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        key, val = repeat_kv(xk, xv, self.repeats, dim=1, bug=self.bug)
        xq, key, val = xq[None, ...], key[None, ...], val[None, ...]                   # (1, M, H, head_dim)
        output = memory_efficient_attention(xq, key, val, mask)
        return self.wo(output.view(seqlen_sum, self.n_heads * self.head_dim))         # (M, D)


class Transformer(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
        self.attention = Attention(dim, n_heads, n_kv_heads, bug)
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim // n_heads, 64), persistent=False)

    def forward(self, h, seqlens):                                                    # (M, D), M = sum(seqlens)
        seqlens = seqlens.tolist()
        positions = positions_from_sizes(seqlens)
        if self.bug == "positions-not-reset":
            positions = torch.arange(h.shape[0])
        att_mask = BlockDiagonalCausalMask(seqlens, block_diagonal=self.bug != "causal-across-sequences")
        freqs_cis = self.freqs_cis[positions]                                         # (M, head_dim/2)
        return h + self.attention(self.attention_norm(h), freqs_cis, att_mask)


BUGS = ("positions-not-reset", "causal-across-sequences", "repeat-kv-tiled")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4", "N=10 D=32 H=4 H_kv=2")   # (the sequences' sizes; the packed count, key/value heads)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4", DIMS[1]: "B=4 T=4 N=16 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=5, D=32, H=4):
    """B sequences packed on one axis of ``N = B·T`` rows, the first of ``T + 1`` tokens, the second of ``T - 1``,
    any others of ``T``; two key/value heads."""
    torch.manual_seed(0)
    seqlens = torch.tensor([T + 1, T - 1] + [T] * (B - 2))
    return Transformer(D, H, H // 2, bug).eval(), (torch.randn(B * T, D), seqlens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
