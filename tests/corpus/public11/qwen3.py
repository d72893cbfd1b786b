"""huggingface/transformers, src/transformers/models/qwen3/modeling_qwen3.py (v4.5x, ``Qwen3Attention``):
``q_norm``/``k_norm`` (``Qwen3RMSNorm(head_dim)``) applied to ``q_proj(x).view(B, T, -1, d)`` before the
transpose and before the rotary, grouped key/value heads with ``repeat_kv``, rotate_half rotary from
``position_ids``, an additive causal mask, ``o_proj``.

Twins: ``norm-whole-width``: the query/key RMSNorm taken over the whole projected width (an ``RMSNorm(H·d)`` on
``(B, T, H·d)`` before the split into heads), the slip of porting Qwen3 from OLMo-2, whose ``q_norm`` is exactly
that. It is OLMo-2's published design: each head's queries are scaled by a norm over every head, which is no
layout error, and on random weights nothing torch records tells the two apart; it is a bug only against
Qwen3's checkpoints (the weights' shapes then differ, and loading fails), so here it is a twin. No bug of this
file's idiom that a run on random weights can show was found beyond those of earlier rounds (GQA's
``repeat_kv``, the causal triangle), so the file has none."""

import sys

import torch
from torch import nn


class Qwen3RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight, self.variance_epsilon = nn.Parameter(torch.ones(hidden_size)), eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Qwen3Attention(nn.Module):
    def __init__(self, d, h, h_kv, bug=""):
        super().__init__()
        self.h, self.h_kv, self.hd, self.bug = h, h_kv, d // h, bug
        self.q_proj = nn.Linear(d, h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, h_kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, h_kv * self.hd, bias=False)
        self.o_proj = nn.Linear(h * self.hd, d, bias=False)
        if bug == "norm-whole-width":
            self.q_norm, self.k_norm = Qwen3RMSNorm(h * self.hd), Qwen3RMSNorm(h_kv * self.hd)
        else:
            self.q_norm, self.k_norm = Qwen3RMSNorm(self.hd), Qwen3RMSNorm(self.hd)
        self.register_buffer("inv_freq", 1.0 / (1e6 ** (torch.arange(0, self.hd, 2).float() / self.hd)))

    def forward(self, hidden_states, position_ids):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.hd)
        if self.bug == "norm-whole-width":
            q = self.q_norm(self.q_proj(hidden_states)).view(hidden_shape).transpose(1, 2)   # bug: norm over H*d
            k = self.k_norm(self.k_proj(hidden_states)).view(hidden_shape).transpose(1, 2)
        else:
            q = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)   # (B, H, T, d)
            k = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)   # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)  # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)           # (B, 1, T, d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.h // self.h_kv), repeat_kv(v, self.h // self.h_kv)
        t = q.shape[2]
        causal = torch.full((t, t), torch.finfo(q.dtype).min).triu(1)[None, None]   # (1, 1, T, T)
        w = torch.matmul(q, k.transpose(2, 3)) * self.hd**-0.5 + causal
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()                # (B, T, H, d)
        return self.o_proj(out.reshape(*input_shape, -1))


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    positions = torch.arange(T).unsqueeze(0).expand(B, T)
    return Qwen3Attention(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), positions)


BUGS = ()
TWINS = ("norm-whole-width",)
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
