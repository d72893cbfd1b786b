"""AI2 OLMo v1 (allenai/OLMo on GitHub, olmo/model.py, 2024: ``OLMoParallelBlock``, ``OLMoBlock.attention`` and
``_scaled_dot_product_attention``, ``RotaryEmbedding``, ``SwiGLU``): a parallel block whose one projection
``fused_attn_ff_proj`` makes the queries, the grouped keys and values, and the feed-forward's input at once:
``self.fused_dims = (d_model, n_kv_heads * head_dim, n_kv_heads * head_dim, hidden_size)`` and
``q, k, v, ff = self.fused_attn_ff_proj(self.attn_norm(x)).split(self.fused_dims, dim=-1)``; heads viewed
``(B, T, n_heads, C // n_heads)`` and ``(B, T, n_kv_heads, C // n_heads)``, rotary on q and k, the key/value heads
repeated ``repeat_interleave(n_heads // n_kv_heads, dim=1)``, causal ``F.scaled_dot_product_attention``, the heads
merged ``att.transpose(1, 2).contiguous().view(B, T, C)`` and ``attn_out``; SwiGLU ``x, gate = x.chunk(2, dim=-1)``
then ``F.silu(gate) * x`` and ``ff_out``; ``x + attn_out + ff_out``.

Bugs: ``kv-heads-tiled``: the key/value heads repeated ``k.repeat(1, n_rep, 1, 1)`` (query head ``h`` reads kv head
``h % n_kv_heads`` where ``repeat_interleave`` gives ``h // n_rep``); ``heads-merged-without-transpose``: the
attention's output merged ``att.reshape(B, T, C)`` straight from ``[B, H, T, d]`` (the transpose forgotten: rows
of the merged output mix heads and tokens)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotate_half(self, x):
        B, nh, T, hs = x.size()
        x = x.view(B, nh, T, 2, hs // 2)
        x1, x2 = x.unbind(dim=-2)
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, q, k):
        T = q.shape[-2]
        seq = torch.arange(T, dtype=torch.float)
        freqs = torch.einsum("i , j -> i j", seq, self.inv_freq)
        positions = torch.cat((freqs, freqs), dim=-1)
        sin, cos = positions.sin()[None, None, :, :], positions.cos()[None, None, :, :]
        q = q * cos + self.rotate_half(q) * sin
        k = k * cos + self.rotate_half(k) * sin
        return q, k


class OLMoParallelBlock(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, mlp_ratio=2, bug=""):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.bug = n_heads, n_kv_heads, bug
        head_dim = d_model // n_heads
        self.hidden_size = mlp_ratio * d_model
        self.fused_dims = (d_model, n_kv_heads * head_dim, n_kv_heads * head_dim, self.hidden_size)
        self.attn_norm = nn.LayerNorm(d_model, elementwise_affine=False)
        self.fused_attn_ff_proj = nn.Linear(d_model, sum(self.fused_dims), bias=False)
        self.attn_out = nn.Linear(d_model, d_model, bias=False)
        self.ff_out = nn.Linear(self.hidden_size // 2, d_model, bias=False)
        self.rotary_emb = RotaryEmbedding(head_dim)

    def attention(self, q, k, v):
        B, T, C = q.size()
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_kv_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_kv_heads, C // self.n_heads).transpose(1, 2)
        q, k = self.rotary_emb(q, k)
        n_rep = self.n_heads // self.n_kv_heads
        if self.bug == "kv-heads-tiled":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        else:
            k = k.repeat_interleave(n_rep, dim=1, output_size=self.n_heads)
            v = v.repeat_interleave(n_rep, dim=1, output_size=self.n_heads)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.bug == "heads-merged-without-transpose":
            att = att.reshape(B, T, C)
        else:
            att = att.transpose(1, 2).contiguous().view(B, T, C)
        return self.attn_out(att)

    def forward(self, x):
        q, k, v, ff = self.fused_attn_ff_proj(self.attn_norm(x)).split(self.fused_dims, dim=-1)
        h, gate = ff.chunk(2, dim=-1)
        return x + self.attention(q, k, v) + self.ff_out(F.silu(gate) * h)


class OLMo(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_kv_heads, depth=2, bug=""):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(OLMoParallelBlock(d_model, n_heads, n_kv_heads, bug=bug) for _ in range(depth))
        self.ln_f = nn.LayerNorm(d_model, elementwise_affine=False)

    def forward(self, input_ids):
        x = self.wte(input_ids)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


BUGS = ("kv-heads-tiled", "heads-merged-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    """``H`` query heads over ``H_kv`` key/value heads; a feed-forward of 2·D (SwiGLU halves it)."""
    torch.manual_seed(0)
    model = OLMo(50, D, H, H_kv, bug=bug).eval()
    return model, (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
