"""Tencent/Tencent-Hunyuan-Large, ``modeling_hunyuan.py`` on the Hugging Face hub (``HunYuanAttention`` with
``use_cla`` and ``use_qk_norm``, 2024): grouped key/value heads; cross-layer attention (``cla_share_factor =
2``): a layer whose index is odd projects only its queries and reuses the key/value states of the layer before
(``kv_states`` handed down); the query and key ``query_layernorm``/``key_layernorm`` (an RMSNorm over
``head_dim``) applied after the rotary; ``repeat_kv``; the causal mask; ``softmax(dim=-1, dtype=float32)``;
``o_proj``. (Rotary here the plain ``rotate_half`` with base 10000.)

Bugs (argument): ``qk-norm-over-tokens``: the hand-written RMSNorm's ``variance = x.pow(2).mean(-2,
keepdim=True)`` (over the tokens of the ``(B, H, T, d)`` layout instead of ``head_dim``: a statistic of the whole
sequence read back into every token); ``cla-values-as-keys``: the sharing layer unpacks the handed-down pair as
``value_states, key_states = kv_states`` in the wrong order (``(k, v)`` stored, read back as ``(v, k)``)."""

import sys

import torch
from torch import nn


class HunYuanRMSNorm(nn.Module):
    def __init__(self, hidden_size, bug="", eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps, self.bug = eps, bug

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-2 if self.bug == "qk-norm-over-tokens" else -1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class HunYuanAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, layer_idx, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads = num_heads, num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.layer_idx, self.bug = layer_idx, bug
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        if layer_idx % 2 == 0:
            self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
            self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.query_layernorm = HunYuanRMSNorm(self.head_dim, bug)
        self.key_layernorm = HunYuanRMSNorm(self.head_dim, bug)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, hidden_states, kv_states=None):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        if self.layer_idx % 2 == 0:
            key_states = self.k_proj(hidden_states)
            key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
            value_states = self.v_proj(hidden_states)
            value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
            kv_states = (key_states, value_states)
        elif self.bug == "cla-values-as-keys":
            value_states, key_states = kv_states
        else:
            key_states, value_states = kv_states
        freqs = torch.outer(torch.arange(q_len, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        query_states = self.query_layernorm(query_states)
        key_states = self.key_layernorm(key_states)
        n_rep = self.num_heads // self.num_key_value_heads
        key_states, value_states = repeat_kv(key_states, n_rep), repeat_kv(value_states, n_rep)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim**0.5
        causal = torch.triu(torch.full((q_len, q_len), torch.finfo(attn_weights.dtype).min), diagonal=1)
        attn_weights = nn.functional.softmax(attn_weights + causal, dim=-1, dtype=torch.float32)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), kv_states


class HunYuanModel(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.layers = nn.ModuleList(HunYuanAttention(hidden_size, num_heads, num_kv_heads, i, bug) for i in range(2))

    def forward(self, x):
        kv_states = None
        for layer in self.layers:
            out, kv_states = layer(x, kv_states)
            x = x + out
        return x


BUGS = ("qk-norm-over-tokens", "cla-values-as-keys")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return HunYuanModel(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
