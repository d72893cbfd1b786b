"""vllm-project/vllm pull request #941 ("[BugFix] Implement RoPE for GPT-J", fixing issues #747 and #590): vLLM's
GPT-J rotated its queries and keys GPT-NeoX style (each element paired with the one half the rotary width away,
``rotate_half``) while GPT-J's weights expect GPT-J style (neighbouring elements paired, ``rotate_every_two``):
every rotated pair mixed the wrong two features and nothing failed. The fix added ``is_neox_style`` to the rotary
embedding and builds GPT-J's with ``is_neox_style=False``.

The idiom (vLLM's ``RotaryEmbedding`` native path and ``GPTJAttention``, ported to torch): a ``cos_sin_cache``
``[max_position, rotary_dim]`` read at ``positions``, split in ``cos``/``sin``; the partial rotary (the first
``rotary_dim`` features of each head rotated, the rest passed); ``_apply_rotary_emb`` with ``torch.chunk`` (NeoX)
or ``x[..., ::2]``/``x[..., 1::2]`` and ``torch.stack(...).flatten(-2)`` (GPT-J); ``qkv_proj`` chunked; causal
``F.scaled_dot_product_attention`` over ``[B, H, T, d]``; ``out_proj``; GPT-J's parallel residual.

Bug (argument): ``neox-style``: GPT-J's rotary built with the NeoX pairing (``is_neox_style=True``)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("neox-style",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def _apply_rotary_emb(x, cos, sin, is_neox_style):
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)                                     # (B, T, 1, r/2)
    if is_neox_style:
        x1, x2 = torch.chunk(x, 2, dim=-1)                                               # (B, T, H, r/2)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]                                               # (B, T, H, r/2)
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox_style:
        return torch.cat((o1, o2), dim=-1)                                               # (B, T, H, r)
    return torch.stack((o1, o2), dim=-1).flatten(-2)                                     # (B, T, H, r)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_size, rotary_dim, max_position=64, base=10000, is_neox_style=True):
        super().__init__()
        self.head_size, self.rotary_dim, self.is_neox_style = head_size, rotary_dim, is_neox_style
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
        freqs = torch.einsum("i,j -> ij", torch.arange(max_position, dtype=torch.float), inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat((freqs.cos(), freqs.sin()), dim=-1))   # (P, r)

    def forward(self, positions, query, key):
        cos_sin = self.cos_sin_cache[positions]                                          # (B, T, r)
        cos, sin = cos_sin.chunk(2, dim=-1)                                              # (B, T, r/2)
        out = []
        for x in (query, key):
            x_rot, x_pass = x[..., :self.rotary_dim], x[..., self.rotary_dim:]
            x_rot = _apply_rotary_emb(x_rot, cos, sin, self.is_neox_style)
            out.append(torch.cat((x_rot, x_pass), dim=-1))                               # (B, T, H, d)
        return out


class GPTJAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_size = heads, dim // heads
        self.qkv_proj = nn.Linear(dim, 3 * dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_size, self.head_size // 2, is_neox_style=bug == "neox-style")

    def forward(self, positions, hidden_states):
        b, t, c = hidden_states.shape
        q, k, v = self.qkv_proj(hidden_states).chunk(chunks=3, dim=-1)                   # (B, T, D)
        q = q.view(b, t, self.heads, self.head_size)                                     # (B, T, H, d)
        k = k.view(b, t, self.heads, self.head_size)                                     # (B, T, H, d)
        q, k = self.rotary_emb(positions, q, k)
        v = v.view(b, t, self.heads, self.head_size)                                     # (B, T, H, d)
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))                                 # (B, H, T, d)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)                    # (B, H, T, d)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, c))                       # (B, T, D)


class GPTJBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = GPTJAttention(dim, heads, bug)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, positions, hidden_states):
        x = self.ln_1(hidden_states)
        return hidden_states + self.attn(positions, x) + self.mlp(x)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    positions = torch.arange(T).expand(B, T)                                             # (B, T)
    return GPTJBlock(D, H, bug).eval(), (positions, torch.randn(B, T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
