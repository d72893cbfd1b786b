"""apple/corenet, corenet/modeling/models/language_modeling/general_gpt.py and transformers' remote code
``apple/OpenELM`` modeling_openelm.py (``OpenELMMultiHeadCausalAttention``, ``OpenELMRotaryEmbedding``): a decoder
whose layers differ in head count (layer-wise scaling). A fused ``qkv_proj`` gives ``(B, T, (Hq + 2 Hk) d)``,
``reshape(B, T, Hq + 2 Hk, d)``, ``transpose(1, 2)``, ``split([Hq, Hk, Hk], dim=1)``; ``q_norm`` and ``k_norm``
(RMSNorm over ``d``), rotary on q and k, keys and values repeated per query group with
``repeat_interleave(dim=1)``, ``scaled_dot_product_attention`` with a causal mask, ``transpose(1, 2)
.reshape(B, T, Hq d)``, ``out_proj``.

Bugs: ``repeat-kv-tiled``: the key/value heads repeated with ``repeat(1, g, 1, 1)`` where ``repeat_interleave`` is
meant (query head ``i`` reads key head ``i % Hk`` instead of ``i // g``; a natural slip in
hand-written GQA ports); ``merge-without-transpose``: the attention output ``(B, H, T, d)``
reshaped straight to ``(B, T, H d)`` (a natural slip: heads and tokens interleaved)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class OpenELMRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, q, k):
        t = torch.arange(k.shape[-2], dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class OpenELMMultiHeadCausalAttention(nn.Module):
    def __init__(self, dim, q_heads, k_heads, head_dim, bug=""):
        super().__init__()
        self.q_heads, self.k_heads, self.head_dim, self.bug = q_heads, k_heads, head_dim, bug
        self.groups = q_heads // k_heads
        self.qkv_proj = nn.Linear(dim, (q_heads + 2 * k_heads) * head_dim, bias=False)
        self.pos_embedding = OpenELMRotaryEmbedding(head_dim)
        self.q_norm, self.k_norm = RMSNorm(head_dim), RMSNorm(head_dim)
        self.out_proj = nn.Linear(q_heads * head_dim, dim, bias=False)

    def forward(self, hidden_states):
        batch_size, seq_length, _ = hidden_states.size()
        qkv = self.qkv_proj(hidden_states)
        qkv = qkv.reshape(batch_size, seq_length, self.q_heads + 2 * self.k_heads, self.head_dim)
        qkv = qkv.transpose(1, 2)                                            # (B, Hq + 2Hk, T, d)
        queries, keys, values = qkv.split([self.q_heads, self.k_heads, self.k_heads], dim=1)
        queries, keys = self.q_norm(queries), self.k_norm(keys)
        queries, keys = self.pos_embedding(queries, keys)
        if self.bug == "repeat-kv-tiled":
            keys = keys.repeat(1, self.groups, 1, 1)
            values = values.repeat(1, self.groups, 1, 1)
        else:
            keys = keys.repeat_interleave(self.groups, dim=1)
            values = values.repeat_interleave(self.groups, dim=1)
        attn_output = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        if self.bug != "merge-without-transpose":
            attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(batch_size, seq_length, self.q_heads * self.head_dim)
        return self.out_proj(attn_output)


class OpenELMDecoderLayer(nn.Module):
    def __init__(self, dim, q_heads, k_heads, head_dim, bug=""):
        super().__init__()
        self.attn_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)
        self.attn = OpenELMMultiHeadCausalAttention(dim, q_heads, k_heads, head_dim, bug)
        self.proj_1 = nn.Linear(dim, 4 * dim, bias=False)
        self.proj_2 = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        y_1, y_2 = self.proj_1(self.ffn_norm(x)).chunk(2, dim=-1)
        return x + self.proj_2(F.silu(y_1) * y_2)


class OpenELMModel(nn.Module):
    def __init__(self, vocab, dim, q_heads, k_heads, head_dim, bug=""):
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab, dim)
        self.layer = OpenELMDecoderLayer(dim, q_heads, k_heads, head_dim, bug)
        self.norm = RMSNorm(dim)

    def forward(self, input_ids):
        return self.norm(self.layer(self.token_embeddings(input_ids)))


BUGS = ("repeat-kv-tiled", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return OpenELMModel(50, D, H, H_kv, D // H, bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
