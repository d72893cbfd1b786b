"""meta-recsys/generative-recommenders, generative_recommenders/research/modeling/sequential/hstu.py
(``SequentialTransductionUnitJagged.forward``, ``_hstu_attention_maybe_from_cache`` without a cache,
``RelativePositionalBias``, and ``HSTUJagged``'s ``invalid_attn_mask=1.0 - self._attn_mask``; HSTU, ICML 2024) with
``fbgemm``'s ``jagged_to_padded_dense``/``dense_to_jagged`` written with a length mask: users' item histories
packed ``(sum of lengths, D)`` with ``x_offsets``; one ``torch.mm(normed_x, self._uvqk)``, ``F.silu``, and
``torch.split`` into ``u, v, q, k``; per head pointwise aggregated attention, no softmax:
``einsum("bnhd,bmhd->bhnm")`` plus a Toeplitz positional bias (``F.pad(w, [0, n]).repeat(n)``, cut and reshaped
``(1, n, 3n - 2)``, its centre ``n`` columns), ``F.silu(qk_attn) / n``, times the causal mask ``tril`` (1 where
attending is allowed), ``einsum("bhnm,bmhd->bnhd")``, ``reshape(B, n, H * d)``, back to jagged; ``u *
layer_norm(attn_output)`` through ``_o`` with the residual.

Bugs: ``mask-not-inverted``: ``invalid_attn_mask=self._attn_mask`` (the ``triu(diagonal=1)`` buffer without ``1.0
-``: each item aggregates only the items after it); ``value-einsum-transposed``: ``einsum("bhmn,bmhd->bnhd")`` (the
weights read key-major: each query takes the column of the score matrix, the transposed attention);
``heads-merge-no-transpose``: ``einsum("bhnm,bmhd->bhnd")`` then ``reshape(B, n, H * d)`` (the heads merged while
still in front of the items)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def jagged_to_padded_dense(values, offsets, max_len):                           # (sum_n, F), (B + 1,)
    lengths = offsets[1:] - offsets[:-1]                                         # (B,)
    mask = torch.arange(max_len)[None, :] < lengths[:, None]                     # (B, n)
    out = values.new_zeros(lengths.numel(), max_len, values.size(-1))            # (B, n, F)
    out[mask] = values
    return out


def dense_to_jagged(dense, offsets):                                             # (B, n, F)
    lengths = offsets[1:] - offsets[:-1]
    return dense[torch.arange(dense.size(1))[None, :] < lengths[:, None]]        # (sum_n, F)


class RelativePositionalBias(nn.Module):
    def __init__(self, max_seq_len):
        super().__init__()
        self._max_seq_len = max_seq_len
        self._w = nn.Parameter(torch.empty(2 * max_seq_len - 1).normal_(mean=0, std=0.02))

    def forward(self):
        n = self._max_seq_len
        t = F.pad(self._w[: 2 * n - 1], [0, n]).repeat(n)                        # (n · (3n - 1),)
        t = t[..., :-n].reshape(1, n, 3 * n - 2)                                 # (1, n, 3n - 2)
        r = (2 * n - 1) // 2
        return t[..., r:-r]                                                      # (1, n, n)


class SequentialTransductionUnitJagged(nn.Module):
    def __init__(self, embedding_dim, linear_hidden_dim, attention_dim, num_heads, max_seq_len, bug=""):
        super().__init__()
        self._embedding_dim, self._linear_dim, self._attention_dim = embedding_dim, linear_hidden_dim, attention_dim
        self._num_heads, self.bug = num_heads, bug
        self._uvqk = nn.Parameter(torch.empty(embedding_dim, (linear_hidden_dim * 2 + attention_dim * 2) * num_heads)
                                  .normal_(mean=0, std=0.02))
        self._o = nn.Linear(linear_hidden_dim * num_heads, embedding_dim)
        self._rel_attn_bias = RelativePositionalBias(max_seq_len)
        self.register_buffer("_attn_mask", torch.triu(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool), 1))

    def forward(self, x, x_offsets):                                             # (sum_n, D), (B + 1,)
        B, n, H = x_offsets.size(0) - 1, self._attn_mask.size(-1), self._num_heads
        normed_x = F.layer_norm(x, [self._embedding_dim], eps=1e-6)
        batched_mm_output = F.silu(torch.mm(normed_x, self._uvqk))               # (sum_n, 2·H·d_v + 2·H·d_k)
        hd_v, hd_k = self._linear_dim * H, self._attention_dim * H
        u, v, q, k = torch.split(batched_mm_output, [hd_v, hd_v, hd_k, hd_k], dim=1)
        if self.bug == "mask-not-inverted":
            invalid_attn_mask = self._attn_mask.float()                          # (n, n)
        else:
            invalid_attn_mask = 1.0 - self._attn_mask.float()                    # (n, n)
        padded_q = jagged_to_padded_dense(q, x_offsets, n)                       # (B, n, H·d_k)
        padded_k = jagged_to_padded_dense(k, x_offsets, n)                       # (B, n, H·d_k)
        qk_attn = torch.einsum("bnhd,bmhd->bhnm", padded_q.view(B, n, H, self._attention_dim),
                               padded_k.view(B, n, H, self._attention_dim))      # (B, H, n, n)
        qk_attn = qk_attn + self._rel_attn_bias().unsqueeze(1)                   # (B, H, n, n)
        qk_attn = F.silu(qk_attn) / n
        qk_attn = qk_attn * invalid_attn_mask.unsqueeze(0).unsqueeze(0)          # (B, H, n, n)
        padded_v = jagged_to_padded_dense(v, x_offsets, n).reshape(B, n, H, self._linear_dim)   # (B, n, H, d_v)
        if self.bug == "value-einsum-transposed":
            out = torch.einsum("bhmn,bmhd->bnhd", qk_attn, padded_v)             # (B, n, H, d_v)
        elif self.bug == "heads-merge-no-transpose":
            out = torch.einsum("bhnm,bmhd->bhnd", qk_attn, padded_v)             # (B, H, n, d_v)
        else:
            out = torch.einsum("bhnm,bmhd->bnhd", qk_attn, padded_v)             # (B, n, H, d_v)
        attn_output = dense_to_jagged(out.reshape(B, n, H * self._linear_dim), x_offsets)   # (sum_n, H·d_v)
        o_input = u * F.layer_norm(attn_output, [hd_v], eps=1e-6)                # (sum_n, H·d_v)
        return self._o(o_input) + x                                              # (sum_n, D)


BUGS = ("mask-not-inverted", "value-einsum-transposed", "heads-merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)   # (T: the longest history, the padded length n)


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    """``B`` users' histories, the first ``T`` items long, the others shorter, packed with offsets."""
    torch.manual_seed(0)
    lengths = torch.tensor([T] + [T - 1 - (i % 2) for i in range(1, B)])
    x_offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])   # (B + 1,)
    model = SequentialTransductionUnitJagged(D, D // H, D // H, H, T, bug).eval()
    return model, (torch.randn(int(lengths.sum()), D), x_offsets)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
