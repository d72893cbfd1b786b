"""huggingface/transformers, src/transformers/models/dbrx/modeling_dbrx.py (v4.40, ``DbrxAttention``): one
``Wqkv`` Linear, ``qkv_states.clamp(min=-clip_qkv, max=clip_qkv)``, ``split([D, kv_heads * d, kv_heads * d],
dim=2)``, each ``view(B, T, -1, d).transpose(1, 2)``; rotary (``rotate_half``, a ``[T, d]`` table from
``position_ids``); ``repeat_kv``; eager attention with an additive causal mask ``[B, 1, T, T]`` sliced to the
keys (``attention_mask[:, :, :, : key_states.shape[-2]]``); softmax in float32; ``out_proj``.

Bugs (argument): ``causal-mask-transposed``: the additive mask built with ``triu(diagonal=1)`` and then
transposed (``.mT``, a mask written as [key, query] and used as [query, key]: each query sees the later keys and
not the earlier ones, the slip behind causal-mask reports in several ports)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class DbrxAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, clip_qkv=8.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.clip_qkv = heads, kv_heads, dim // heads, clip_qkv
        self.Wqkv = nn.Linear(dim, dim + 2 * kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, hidden_states, position_ids, attention_mask):            # (B, T, D), (B, T), (B, 1, T, T)
        B, T, D = hidden_states.shape
        qkv_states = self.Wqkv(hidden_states).clamp(min=-self.clip_qkv, max=self.clip_qkv)
        kv_width = self.kv_heads * self.head_dim
        q, k, v = qkv_states.split([D, kv_width, kv_width], dim=2)
        q = q.view(B, T, -1, self.head_dim).transpose(1, 2)
        k = k.view(B, T, -1, self.head_dim).transpose(1, 2)
        v = v.view(B, T, -1, self.head_dim).transpose(1, 2)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]  # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)                # (B, 1, T, d)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.heads // self.kv_heads), repeat_kv(v, self.heads // self.kv_heads)
        w = torch.matmul(q, k.transpose(2, 3)) / self.head_dim**0.5
        w = w + attention_mask[:, :, :, : k.shape[-2]]
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.out_proj(out.reshape(B, T, D))


class DbrxBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.norm_1 = nn.LayerNorm(dim, bias=False)
        self.attn = DbrxAttention(dim, heads, heads // 2)

    def forward(self, x):                                                        # (B, T, D)
        B, T, _ = x.shape
        mask = torch.full((T, T), torch.finfo(x.dtype).min).triu(1)
        if self.bug == "causal-mask-transposed":
            mask = mask.mT
        mask = mask[None, None].expand(B, 1, T, T)
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        return x + self.attn(self.norm_1(x), position_ids, mask)


BUGS = ("causal-mask-transposed",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return DbrxBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
