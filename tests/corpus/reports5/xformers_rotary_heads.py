"""facebookresearch/xformers issue #841 ("RotaryEmbedding applied to the incorrect channel dimension",
labelled bug; found "downstream of xformers" by a user whose model misbehaved): the attention ops take
``[B, M, H, K]`` (batch, sequence, heads, head features), but ``RotaryEmbedding.forward`` built its tables
with ``_update_cos_sin_tables(k, seq_dimension=-2)``: ``arange(x.shape[-2])``, the *heads*, and
``apply_rotary_pos_emb`` sliced and applied the ``[1, 1, len, K]`` table along axis -2 — each head was
rotated by its head index and every token of a head by the same angle, so ``q·k`` carried no position at
all. The fix the report asks for reads the positions along the sequence axis (``seq_dimension=1``) and
lays the table out ``[1, M, 1, K]`` to match.

xformers' idiom: ``RotaryEmbedding(dim_model)`` with ``inv_freq``, ``einsum("i,j->ij", t, inv_freq)``,
``cat((freqs, freqs), -1)`` cached cos/sin, ``rotate_half`` by ``chunk(2, -1)``, ``apply_rotary_pos_emb``
slicing the cache to the input's length; q/k/v ``[B, M, H, K]`` from ``view(B, M, H, K)``, and
``memory_efficient_attention`` (here its reference: ``transpose(1, 2)``, scale, ``softmax``, back).

Bug (argument): ``heads-as-sequence``: the rotary tables over the heads axis."""

import sys

import torch
from torch import nn

BUGS = ("heads-as-sequence",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin, seq_dimension):
    if seq_dimension == 1:
        cos, sin = cos[:, : x.shape[1]], sin[:, : x.shape[1]]               # [1, M, 1, K]
    else:
        cos, sin = cos[:, :, : x.shape[-2], :], sin[:, :, : x.shape[-2], :]  # [1, 1, len, K]
    return (x * cos) + (rotate_half(x) * sin)                               # [rope]


class RotaryEmbedding(nn.Module):
    def __init__(self, dim_model, bug=""):
        super().__init__()
        self.bug = bug
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim_model, 2).float() / dim_model)))

    def _update_cos_sin_tables(self, x, seq_dimension=1):
        t = torch.arange(x.shape[seq_dimension], dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)                             # [len, K]
        if seq_dimension == 1:
            return emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]  # [1, M, 1, K]
        return emb.cos()[None, None, :, :], emb.sin()[None, None, :, :]      # [1, 1, len, K]

    def forward(self, q, k):
        seq_dimension = -2 if self.bug == "heads-as-sequence" else 1
        cos, sin = self._update_cos_sin_tables(k, seq_dimension=seq_dimension)
        return (apply_rotary_pos_emb(q, cos, sin, seq_dimension),
                apply_rotary_pos_emb(k, cos, sin, seq_dimension))


def memory_efficient_attention(query, key, value):
    query, key, value = (t.transpose(1, 2) for t in (query, key, value))   # [B, H, M, K]
    attn = (query * query.shape[-1] ** -0.5) @ key.transpose(-2, -1)       # [B, H, M, M]
    attn = attn.softmax(-1)
    return (attn @ value).transpose(1, 2)                                   # [B, M, H, K]


class Attention(nn.Module):
    def __init__(self, dim_model, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim_model // num_heads
        self.qkv = nn.Linear(dim_model, 3 * dim_model)
        self.proj = nn.Linear(dim_model, dim_model)
        self.rotary = RotaryEmbedding(self.head_dim, bug)

    def forward(self, x):
        B, M, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, M, self.num_heads, self.head_dim)                     # [B, M, H, K]
        k = k.view(B, M, self.num_heads, self.head_dim)
        v = v.view(B, M, self.num_heads, self.head_dim)
        q, k = self.rotary(q, k)
        out = memory_efficient_attention(q, k, v)                           # [B, M, H, K]
        return self.proj(out.reshape(B, M, -1))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
