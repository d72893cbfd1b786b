"""xai-org/grok-1, model.py (``MultiHeadAttention.__call__``, ``RotaryEmbedding``), written in PyTorch as the
hpcai-tech/grok-1 port (``modeling_grok1.py``) does: ``query_heads`` ``(B, T, H, d)``, ``key_heads``/
``value_heads`` ``(B, T, H_kv, d)``; the queries grouped ``query_heads.reshape(B, T, H_kv, H // H_kv, d)`` and
the logits taken by one einsum over the groups (``"...thHd,...Thd->...hHtT"``, no ``repeat_kv``), times
``attn_output_multiplier``; the logits soft-capped ``max_attn_val * tanh(attn_logits / max_attn_val)`` with
``max_attn_val = 30.0``; then the causal mask (``jnp.where(mask, attn_logits, -1e30)``), softmax in float32, and
``"...hHtT,...Thd->...thHd"`` back, reshaped ``(B, T, H * d)`` into ``dense``.

Bugs (argument): ``values-by-queries``: the second einsum written ``"...hHTt,...Thd->...thHd"`` (the weights
contracted over the query axis: each output token a mix weighted by how much the others attend to it). Twin
``mask-before-softcap``: the mask applied before the cap (a port that moves ``jnp.where(mask, ...)`` above the
``tanh`` line): the hidden logits become ``-30`` rather than ``-1e30``, a weight of at most ``e^-60`` of a seen
key's while the seen logits stay within the cap; here its output equals the correct one exactly (max difference
0.0 in float32), so it is no bug a trace can show (only a row whose every seen logit sits at ``-30`` would
leak)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim, self.base = dim, base

    def forward(self, x, seq_dim=1):                                               # (B, T, h, d)
        T = x.shape[seq_dim]
        exponents = torch.arange(0, self.dim, 2, dtype=torch.float32)
        inv_freq = 1.0 / (self.base ** (exponents / self.dim))                     # (d/2,)
        t = torch.arange(T, dtype=torch.float32)
        phase = torch.einsum("bi,j->bij", t[None, :], inv_freq)                    # (1, T, d/2)
        phase = torch.cat([phase, phase], dim=-1)[:, :, None, :]                   # (1, T, 1, d)
        return x * torch.cos(phase) + rotate_half(x) * torch.sin(phase)


class MultiHeadAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.heads, self.kv_heads, self.key_size, self.bug = heads, kv_heads, dim // heads, bug
        self.attn_output_multiplier, self.max_attn_val = self.key_size**-0.5, 30.0
        self.query = nn.Linear(dim, heads * self.key_size, bias=False)
        self.key = nn.Linear(dim, kv_heads * self.key_size, bias=False)
        self.value = nn.Linear(dim, kv_heads * self.key_size, bias=False)
        self.dense = nn.Linear(heads * self.key_size, dim, bias=False)
        self.rotate = RotaryEmbedding(self.key_size)

    def forward(self, x, mask):                                                    # (B, T, D), (1, 1, T, T)
        B, T, _ = x.shape
        query_heads = self.rotate(self.query(x).reshape(B, T, self.heads, self.key_size))       # (B, T, H, d)
        key_heads = self.rotate(self.key(x).reshape(B, T, self.kv_heads, self.key_size))        # (B, T, H_kv, d)
        value_heads = self.value(x).reshape(B, T, self.kv_heads, self.key_size)                 # (B, T, H_kv, d)
        query_heads = query_heads.reshape(B, T, self.kv_heads, self.heads // self.kv_heads, self.key_size)
        attn_logits = torch.einsum("bthHd,bThd->bhHtT", query_heads, key_heads).float()         # (B, H_kv, G, T, T)
        attn_logits = attn_logits * self.attn_output_multiplier
        mask = mask[:, :, None, :, :]                                              # (1, 1, 1, T, T)
        if self.bug == "mask-before-softcap":
            attn_logits = torch.where(mask, attn_logits, -1e30)
        attn_logits = self.max_attn_val * torch.tanh(attn_logits / self.max_attn_val)
        if self.bug != "mask-before-softcap":
            attn_logits = torch.where(mask, attn_logits, -1e30)
        attn_weights = torch.softmax(attn_logits, dim=-1).to(query_heads.dtype)
        if self.bug == "values-by-queries":
            attn = torch.einsum("bhHTt,bThd->bthHd", attn_weights, value_heads)
        else:
            attn = torch.einsum("bhHtT,bThd->bthHd", attn_weights, value_heads)    # (B, T, H_kv, G, d)
        attn = attn.reshape(B, T, -1)                                              # (B, T, D)
        return self.dense(attn)


class DecoderLayer(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.pre_attn_norm, self.post_attn_norm = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.attn = MultiHeadAttention(dim, heads, kv_heads, bug)

    def forward(self, h):                                                          # (B, T, D)
        T = h.shape[1]
        causal = torch.tril(torch.ones(1, 1, T, T, dtype=torch.bool))
        return h + self.post_attn_norm(self.attn(self.pre_attn_norm(h), causal))


BUGS = ("values-by-queries",)
TWINS = ("mask-before-softcap",)
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return DecoderLayer(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
