"""meta-llama/llama-models, models/llama4/model.py (v0.2, ``Attention``, ``apply_rotary_emb``,
``create_chunked_attention_mask``) with huggingface/transformers models/llama4/modeling_llama4.py (v4.51,
``Llama4TextL2Norm``, the attention temperature tuning): rotary layers (``use_rope``) with the chunked causal
mask ``(q_idx // C == kv_idx // C) & (kv_idx <= q_idx)`` and an L2 norm of q and k over ``head_dim``, alternating
with NoPE global layers (plain causal mask, queries scaled per position by ``log(floor((pos + 1) / floor_scale)
+ 1) * attn_scale + 1``, viewed ``(1, T, 1, 1)`` before the heads move); the rotary applied in complex form
(``torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))`` times ``freqs_cis`` of shape ``(T, d/2)``
viewed ``(1, T, 1, d/2)``, ``view_as_real(...).flatten(3)``); q/k/v ``view(B, T, H, d)``, grouped keys by
``repeat_interleave(dim=2)``, ``transpose(1, 2)``, ``F.scaled_dot_product_attention(..., attn_mask=mask)``.

Bugs (argument): ``chunk-from-modulo``: the key's chunk id taken ``kv_idx % C`` (the wrong index op for a chunk
id: a query in chunk 1 then reads the keys at in-chunk offset 1 of earlier chunks, not its own chunk);
``scales-after-transpose``: the temperature multiplied into q after ``transpose(1, 2)`` (``(1, T, 1, 1)`` then
lines up with the heads: raises where T and H differ, and at T = H scales each head by a position's factor)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def apply_rotary_emb(xq, xk, freqs_cis):                                            # (B, T, H, d), (T, d/2)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))           # (B, T, H, d/2)
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])                   # (1, T, 1, d/2)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def precompute_freqs_cis(dim, end, theta=500000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))               # (d/2,)
    t = torch.arange(end).float()
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))           # (T, d/2) complex


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, use_rope, bug="", floor_scale=4, attn_scale=0.1):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.use_rope, self.bug, self.floor_scale, self.attn_scale = use_rope, bug, floor_scale, attn_scale
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.heads, self.head_dim)               # (B, T, H, d)
        xk = self.wk(x).view(bsz, seqlen, self.kv_heads, self.head_dim)            # (B, T, H_kv, d)
        xv = self.wv(x).view(bsz, seqlen, self.kv_heads, self.head_dim)
        if self.use_rope:
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
            xq, xk = F.normalize(xq, dim=-1), F.normalize(xk, dim=-1)             # Llama4TextL2Norm
        else:
            positions = torch.arange(seqlen).float()
            attn_scales = torch.log(torch.floor((positions + 1.0) / self.floor_scale) + 1.0) * self.attn_scale + 1.0
            attn_scales = attn_scales.view(1, seqlen, 1, 1)                         # (1, T, 1, 1)
            if self.bug != "scales-after-transpose":
                xq = xq * attn_scales
        xk = xk.repeat_interleave(self.heads // self.kv_heads, dim=2)
        xv = xv.repeat_interleave(self.heads // self.kv_heads, dim=2)
        xq, xk, xv = (t.transpose(1, 2) for t in (xq, xk, xv))                      # (B, H, T, d)
        if not self.use_rope and self.bug == "scales-after-transpose":
            xq = xq * attn_scales
        attn_output = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=mask)   # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(attn_output)


class Llama4Text(nn.Module):
    def __init__(self, dim, heads, bug="", layers=2, chunk=4):
        super().__init__()
        self.bug, self.chunk = bug, chunk
        # every fourth layer NoPE in Llama 4; here rope, NoPE
        self.layers = nn.ModuleList(Attention(dim, heads, heads // 2, i % 2 == 0, bug) for i in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim // heads, 64), persistent=False)

    def create_chunked_attention_mask(self, seq_len):
        q_idx, kv_idx = torch.arange(seq_len)[:, None], torch.arange(seq_len)[None, :]
        kv_chunk = kv_idx % self.chunk if self.bug == "chunk-from-modulo" else kv_idx // self.chunk
        return (q_idx // self.chunk == kv_chunk) & (kv_idx <= q_idx)                 # (T, T) True: attend

    def forward(self, h):                                                           # (B, T, D)
        seqlen = h.shape[1]
        freqs_cis = self.freqs_cis[:seqlen]
        chunked = self.create_chunked_attention_mask(seqlen)
        causal = torch.ones(seqlen, seqlen, dtype=torch.bool).tril()
        for layer in self.layers:
            mask = chunked if layer.use_rope else causal
            h = h + layer(self.norm(h), freqs_cis, mask)
        return h


BUGS = ("chunk-from-modulo", "scales-after-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return Llama4Text(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
