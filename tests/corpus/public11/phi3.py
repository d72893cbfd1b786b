"""huggingface/transformers, src/transformers/models/phi3/modeling_phi3.py (v4.4x, ``Phi3Attention``): one
``qkv_proj`` of width ``(H + 2·H_kv)·d`` cut by offsets (``query_pos = H * d``; ``qkv[..., :query_pos]``,
``qkv[..., query_pos : query_pos + H_kv * d]``, ``qkv[..., query_pos + H_kv * d :]``), each viewed
``(B, T, -1, d)`` and transposed, rotate_half rotary, ``repeat_kv`` for the grouped key/value heads, an
additive causal mask, ``o_proj``.

Bugs (argument): ``value-offset``: the values sliced at the keys' offsets (``qkv[..., query_pos : query_pos +
H_kv * d]``, a copy-paste slip of the three offset lines): every shape agrees, the values are the keys and the
value columns of ``qkv_proj`` are never read."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, T, d)


class Phi3Attention(nn.Module):
    def __init__(self, d, h, h_kv, bug=""):
        super().__init__()
        self.h, self.h_kv, self.hd, self.bug = h, h_kv, d // h, bug
        self.qkv_proj = nn.Linear(d, (h + 2 * h_kv) * self.hd, bias=False)
        self.o_proj = nn.Linear(h * self.hd, d, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd)))

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        qkv = self.qkv_proj(hidden_states)                                   # (B, T, (H+2H_kv)d)
        query_pos = self.h * self.hd
        kv = self.h_kv * self.hd
        query_states = qkv[..., :query_pos]
        key_states = qkv[..., query_pos : query_pos + kv]
        if self.bug == "value-offset":
            value_states = qkv[..., query_pos : query_pos + kv]              # bug: the keys' columns again
        else:
            value_states = qkv[..., query_pos + kv :]
        query_states = query_states.view(bsz, q_len, self.h, self.hd).transpose(1, 2)       # (B, H, T, d)
        key_states = key_states.view(bsz, q_len, self.h_kv, self.hd).transpose(1, 2)        # (B, H_kv, T, d)
        value_states = value_states.view(bsz, q_len, self.h_kv, self.hd).transpose(1, 2)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)  # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)           # (B, 1, T, d)
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        key_states = repeat_kv(key_states, self.h // self.h_kv)
        value_states = repeat_kv(value_states, self.h // self.h_kv)
        causal = torch.full((q_len, q_len), torch.finfo(torch.float32).min).triu(1)   # (T, T)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.hd**0.5
        attn_weights = nn.functional.softmax(attn_weights + causal, dim=-1)          # (B, H, T, T)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        return self.o_proj(attn_output.reshape(bsz, q_len, -1))


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    positions = torch.arange(T).unsqueeze(0).expand(B, T)
    return Phi3Attention(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), positions)


BUGS = ("value-offset",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
