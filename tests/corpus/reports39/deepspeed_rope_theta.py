"""deepspeedai/DeepSpeed (formerly microsoft/DeepSpeed) issue #4442 ("[BUG] Deepspeed shows incorrect results for
CodeLlama"): DeepSpeed's inference rotary kernel hard-codes the base ``10000.0`` in its inverse frequencies, while
CodeLlama's config sets ``rope_theta = 1000000.0``: every rotation angle is wrong, the generated code differs from
transformers', and nothing fails. The fix passes ``rope_theta`` from the model config to the rotary embedding.

The idiom (a Llama attention as DeepSpeed's inference path computes it, ported to torch): ``q_proj``/``k_proj``/
``v_proj``, ``view(B, T, H, d).transpose(1, 2)``, the rotary frequencies ``1 / theta ** (arange(0, d, 2) / d)``,
``cos``/``sin`` of ``positions ⊗ inv_freq`` duplicated, ``q * cos + rotate_half(q) * sin`` (and the keys), causal
attention with ``masked_fill(-inf)`` and softmax, ``o_proj``; RMSNorm pre-norm residual block and a SwiGLU MLP. The
config's ``rope_theta`` is ``1e6``.

Bug (argument): ``theta-hardcoded``: the inverse frequencies built with ``10000.0`` instead of ``rope_theta``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("theta-hardcoded",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class LlamaAttention(nn.Module):
    def __init__(self, dim, heads, rope_theta=1000000.0, bug=""):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        base = 10000.0 if bug == "theta-hardcoded" else rope_theta
        inv_freq = 1.0 / (base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x, positions):
        b, t, c = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)         # (B, H, T, d)
        k = self.k_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)         # (B, H, T, d)
        v = self.v_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)         # (B, H, T, d)
        freqs = positions[:, :, None].float() * self.inv_freq[None, None, :]             # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                          # (B, T, d)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]                                # (B, 1, T, d)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)                      # (B, H, T, T)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(causal, float("-inf"))
        out = scores.softmax(dim=-1) @ v                                                 # (B, H, T, d)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, c))                         # (B, T, D)


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.self_attn = LlamaAttention(dim, heads, bug=bug)
        self.gate_proj = nn.Linear(dim, 2 * dim, bias=False)
        self.up_proj = nn.Linear(dim, 2 * dim, bias=False)
        self.down_proj = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x, positions):
        x = x + self.self_attn(self.input_layernorm(x), positions)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    positions = torch.arange(T).expand(B, T)                                             # (B, T)
    return LlamaBlock(D, H, bug).eval(), (torch.randn(B, T, D), positions)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
