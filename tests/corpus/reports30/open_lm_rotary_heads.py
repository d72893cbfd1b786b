"""mlfoundations/open_lm issue #4 ("Problem in position embedding"; a maintainer: "Good catch!"): open_lm's
``CustomAttn`` viewed its queries and keys ``(batch, seq, heads, head_dim)`` (the layout xformers'
``memory_efficient_attention`` takes) and handed them straight to an xformers-style ``RotaryEmbedding``, which
reads the sequence from dimension -2: it built its cos/sin tables from ``k.shape[-2]`` (the number of heads)
and rotated each *head* by its head index, while every token got the same rotation. The fix permutes to
``(batch, heads, seq, head_dim)`` around the rotary call and back (the reporter's ``RotaryWithCast``).

The idiom: one fused ``in_proj`` without bias, ``chunk(3, dim=-1)``, the heads viewed ``(B, T, H, d_k)``,
``RotaryWithCast`` (``inv_freq``, ``einsum('i,j->ij', t, inv_freq)``, ``cat((freqs, freqs))``, tables
``[None, None, :, :]``, ``rotate_half`` by halves, the result cast back to the values' dtype), then the
xformers call (written here in torch: ``(B, T, H, d_k)`` in, causal attention, ``(B, T, H, d_k)`` out), the
heads merged by ``view(B, T, -1)`` and ``out_proj``.

Bug (rotary axis): ``rotary-over-heads``: the rotary embedding applied to the ``(B, T, H, d_k)`` tensors
without the permute (positions counted along the heads)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rotary-over-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin):
    cos = cos[:, :, : x.shape[-2], :]
    sin = sin[:, :, : x.shape[-2], :]
    return (x * cos) + (rotate_half(x) * sin)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim_model):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim_model, 2).float() / dim_model)))

    def _update_cos_sin_tables(self, x, seq_dimension=-2):
        seq_len = x.shape[seq_dimension]
        t = torch.arange(seq_len, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)                                # (seq, d_k)
        return emb.cos()[None, None, :, :], emb.sin()[None, None, :, :]        # (1, 1, seq, d_k)

    def forward(self, q, k):
        cos, sin = self._update_cos_sin_tables(k, seq_dimension=-2)
        return apply_rotary_pos_emb(q, cos, sin), apply_rotary_pos_emb(k, cos, sin)


class RotaryWithCast(RotaryEmbedding):
    def __init__(self, dim_model, bug=""):
        super().__init__(dim_model)
        self.bug = bug

    def forward(self, q, k, v):
        if self.bug == "rotary-over-heads":
            q, k = super().forward(q, k)
            return q.to(v.dtype), k.to(v.dtype), v
        q, k = super().forward(q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3))   # (B, H, T, d_k)
        q = q.permute(0, 2, 1, 3)                                              # (B, T, H, d_k)
        k = k.permute(0, 2, 1, 3)                                              # (B, T, H, d_k)
        return q.to(v.dtype), k.to(v.dtype), v


def xformers_attn(queries, keys, values, is_causal):
    q = queries.transpose(1, 2)                                                # (B, H, T, d_k)
    k = keys.transpose(1, 2)                                                   # (B, H, T, d_k)
    v = values.transpose(1, 2)                                                 # (B, H, T, d_k)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)         # (B, H, T, d_k)
    return out.transpose(1, 2)                                                 # (B, T, H, d_k)


class CustomAttn(nn.Module):
    def __init__(self, dim, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.in_proj = nn.Linear(dim, 3 * dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        self.pos_embed = RotaryWithCast(self.head_dim, bug=bug)

    def forward(self, x, is_causal=True):
        batchsize, seqlen, _ = x.shape
        queries, keys, vals = self.in_proj(x).chunk(3, dim=-1)
        queries = queries.view(batchsize, seqlen, self.n_heads, self.head_dim)  # (B, T, H, d_k)
        keys = keys.view(batchsize, seqlen, self.n_heads, self.head_dim)        # (B, T, H, d_k)
        vals = vals.view(batchsize, seqlen, self.n_heads, self.head_dim)        # (B, T, H, d_k)
        queries, keys, vals = self.pos_embed(queries, keys, vals)
        output = xformers_attn(queries, keys, vals, is_causal=is_causal)       # (B, T, H, d_k)
        output = output.view(batchsize, seqlen, -1)                            # (B, T, D)
        return self.out_proj(output)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CustomAttn(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
