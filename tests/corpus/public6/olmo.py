"""allenai/OLMo, olmo/model.py (``OLMoSequentialBlock.forward``, ``OLMoBlock.attention``,
``RotaryEmbedding``, ``get_causal_attention_bias``; https://github.com/allenai/OLMo): one fused
``att_proj`` cut by ``qkv.split(self.fused_dims, dim=-1)`` with ``clamp_`` (``clip_qkv``); q/k layer norms;
heads by ``view(B, T, n_heads, C // n_heads).transpose(1, 2)``; rotary tables ``cat((freqs, freqs))``
applied with OLMo's ``rotate_half`` (``view(B, nh, T, 2, hs // 2).unbind(dim=-2)``); an attention bias:
the causal ``triu(ones, 1)`` filled with ``finfo.min``, viewed ``(1, 1, T, T)``, plus the padding mask
``(1.0 - attention_mask)[:, None, None, :] * finfo.min``, sliced ``[:, :, key_len - query_len : key_len,
:key_len]`` and given to ``F.scaled_dot_product_attention`` as ``attn_mask``.

Bugs (argument): ``pad-on-queries``: the padding mask laid ``[:, None, :, None]``: padded queries
hidden, padded keys attended (the key-padding axis mistake); ``rotate-interleaved``: ``rotate_half``
written for interleaved pairs (``x[..., ::2]``, ``x[..., 1::2]``) on a table built in halves
(``cat((freqs, freqs))``): features paired with the wrong partners (the GPT-J/NeoX layout mix-up)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pad-on-queries", "rotate-interleaved")
DIMS = ("B=2 T=6 D=32 H=4",)


class RotaryEmbedding(nn.Module):
    def __init__(self, d_model=32, n_heads=4, bug=""):
        super().__init__()
        self.dim, self.bug = d_model // n_heads, bug

    def get_rotary_embedding(self, seq_len):
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, dtype=torch.float) / self.dim))
        seq = torch.arange(seq_len, dtype=torch.float)
        freqs = torch.einsum("i , j -> i j", seq, inv_freq)  # (T, d_k/2)
        positions = torch.cat((freqs, freqs), dim=-1)  # (T, d_k)
        return positions.sin()[None, None, :, :], positions.cos()[None, None, :, :]  # (1, 1, T, d_k)

    def rotate_half(self, x):
        if self.bug == "rotate-interleaved":
            x1, x2 = x[..., ::2], x[..., 1::2]  # bug: interleaved pairs on a table built in halves
            return torch.stack((-x2, x1), dim=-1).flatten(-2)
        B, nh, T, hs = x.size()
        x = x.view(B, nh, T, 2, hs // 2)  # (B, H, T, 2, d_k/2)
        x1, x2 = x.unbind(dim=-2)
        return torch.cat((-x2, x1), dim=-1)  # (B, H, T, d_k)

    def apply_rotary_pos_emb(self, pos_sin, pos_cos, t):
        return (t * pos_cos) + (self.rotate_half(t) * pos_sin)

    def forward(self, q, k):
        q_, k_ = q.float(), k.float()
        query_len, key_len = q_.shape[-2], k_.shape[-2]
        pos_sin, pos_cos = self.get_rotary_embedding(key_len)
        q_ = self.apply_rotary_pos_emb(pos_sin[:, :, key_len - query_len : key_len, :],
                                       pos_cos[:, :, key_len - query_len : key_len, :], q_)
        k_ = self.apply_rotary_pos_emb(pos_sin, pos_cos, k_)
        return q_.type_as(q), k_.type_as(k)


class OLMoSequentialBlock(nn.Module):
    def __init__(self, d_model=32, n_heads=4, clip_qkv=8.0, bug=""):
        super().__init__()
        self.n_heads, self.clip_qkv = n_heads, clip_qkv
        self.fused_dims = (d_model, d_model, d_model)
        self.attn_norm = nn.LayerNorm(d_model)
        self.att_proj = nn.Linear(d_model, sum(self.fused_dims), bias=False)
        self.q_norm, self.k_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn_out = nn.Linear(d_model, d_model, bias=False)
        self.rotary_emb = RotaryEmbedding(d_model, n_heads, bug)

    def attention(self, q, k, v, attention_bias):
        B, T, C = q.size()
        q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, H, T, d_k)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, H, T, d_k)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)  # (B, H, T, d_k)
        query_len, key_len = q.shape[-2], k.shape[-2]
        q, k = self.rotary_emb(q, k)
        attention_bias = attention_bias[:, :, key_len - query_len : key_len, :key_len]  # (B, 1, T, T)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_bias, dropout_p=0.0, is_causal=False)
        att = att.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, D)
        return self.attn_out(att)

    def forward(self, x, attention_bias):
        qkv = self.att_proj(self.attn_norm(x))  # (B, T, 3·D)
        qkv.clamp_(min=-self.clip_qkv, max=self.clip_qkv)
        q, k, v = qkv.split(self.fused_dims, dim=-1)  # (B, T, D) each
        return x + self.attention(q, k, v, attention_bias)


class OLMo(nn.Module):
    def __init__(self, d_model=32, n_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.block = OLMoSequentialBlock(d_model, n_heads, bug=bug)

    def forward(self, x, attention_mask):
        seq_len = x.shape[1]
        min_value = torch.finfo(torch.float).min
        causal = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.float), diagonal=1)
        causal.masked_fill_(causal == 1, min_value)
        causal = causal.view(1, 1, seq_len, seq_len)  # (1, 1, T, T)
        pad = (1.0 - attention_mask.float()) * min_value  # (B, T)
        if self.bug == "pad-on-queries":
            pad = pad[:, None, :, None]  # bug: (B, 1, T, 1)
        else:
            pad = pad[:, None, None, :]  # (B, 1, 1, T)
        attention_bias = (causal + pad).clamp(min=min_value)  # (B, 1, T, T)
        return self.block(x, attention_bias)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': the second sequence has two padded tokens at its end."""
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, T - 2 :] = 0
    return OLMo(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
