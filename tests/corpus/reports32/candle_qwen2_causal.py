"""huggingface/candle pull request #3609 ("Fix Qwen2 attention mask to stay causal when attn_mask is provided",
fixes issue #3567): ``Qwen2Model::prepare_attention_mask`` built the mask from the padding signal alone, so a
caller that passed ``attn_mask`` got *bidirectional* attention: every real token could attend to the tokens
after it. A single prompt (no mask: the causal branch) was unaffected, which kept it silent; batched
evaluation with padding gave "trivially perfect next-token accuracy". The fix combines the padding mask with
the causal triangle.

The idiom (candle's ``qwen2.rs``, written here in torch): ``q_proj``/``k_proj``/``v_proj`` with bias and
``o_proj`` without, ``(b, L, h, d)`` split and ``transpose(1, 2)``, rotary embedding (``rotate_half``, cos/sin
from ``arange(seq_len)``), grouped key/value heads repeated by ``repeat_kv``, scores ``q @ k^T / sqrt(d)`` plus an
additive ``(b, 1, L, L)`` mask, ``softmax(-1)``, heads merged back, the residual around RMSNorm'd attention and
a SwiGLU MLP. The batch is right-padded (the second prompt ends in padding), so the padding mask is given.

Bug (mask): ``padding-only``: the additive mask holds the padding columns but no causal triangle."""

import sys

import torch
from torch import nn

BUGS = ("padding-only",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
NEG = torch.finfo(torch.float32).min


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary(seq_len, dim, base=10000.0):
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)
    freqs = torch.outer(torch.arange(seq_len).float(), inv_freq)                        # (L, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)                                             # (L, d)
    return emb.cos(), emb.sin()


def repeat_kv(x, n_rep):
    b, h_kv, seq_len, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None].expand(b, h_kv, n_rep, seq_len, d).reshape(b, h_kv * n_rep, seq_len, d) # (b, h, L, d)


def prepare_attention_mask(attn_mask, bug=""):
    b, seq_len = attn_mask.shape
    padding = (1.0 - attn_mask[:, None, None, :].float()) * NEG                         # (b, 1, 1, L)
    if bug == "padding-only":
        return padding.expand(b, 1, seq_len, seq_len)                                   # (b, 1, L, L)
    causal = torch.triu(torch.full((seq_len, seq_len), NEG), diagonal=1)                # (L, L)
    return (causal[None, None] + padding).clamp(min=NEG)                                # (b, 1, L, L)


class Qwen2Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, mask):
        b, seq_len, _ = x.shape
        q = self.q_proj(x).view(b, seq_len, self.heads, self.head_dim).transpose(1, 2)  # (b, h, L, d)
        k = self.k_proj(x).view(b, seq_len, self.kv_heads, self.head_dim).transpose(1, 2) # (b, h_kv, L, d)
        v = self.v_proj(x).view(b, seq_len, self.kv_heads, self.head_dim).transpose(1, 2) # (b, h_kv, L, d)
        cos, sin = rotary(seq_len, self.head_dim)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, self.heads // self.kv_heads)                                   # (b, h, L, d)
        v = repeat_kv(v, self.heads // self.kv_heads)                                   # (b, h, L, d)
        scores = q @ k.transpose(2, 3) / self.head_dim ** 0.5 + mask                    # (b, h, L, L)
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(b, seq_len, self.heads * self.head_dim) # (b, L, D)
        return self.o_proj(out)


class Qwen2DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn = Qwen2Attention(hidden, heads, heads // 2)
        self.input_layernorm = RMSNorm(hidden)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, 2 * hidden, bias=False)
        self.up_proj = nn.Linear(hidden, 2 * hidden, bias=False)
        self.down_proj = nn.Linear(2 * hidden, hidden, bias=False)

    def forward(self, x, attn_mask):
        mask = prepare_attention_mask(attn_mask, self.bug)
        x = x + self.self_attn(self.input_layernorm(x), mask)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attn_mask = torch.ones(B, T, dtype=torch.long)
    attn_mask[1:, T - 2:] = 0
    return Qwen2DecoderLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D), attn_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
