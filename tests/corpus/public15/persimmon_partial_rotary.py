"""huggingface/transformers, src/transformers/models/persimmon/modeling_persimmon.py (v4.45,
``PersimmonAttention``, ``PersimmonRotaryEmbedding``): one ``query_key_value`` linear, ``_split_heads``:
``fused_qkv.view(B, T, H, 3, d)`` and ``fused_qkv[..., 0, :]``, ``[..., 1, :]``, ``[..., 2, :]``; ``q_layernorm``
and ``k_layernorm`` (``qk_layernorm=True``), a LayerNorm over the head width applied in the ``(B, T, H, d)``
layout; ``transpose(1, 2)``; partial rotary: ``rotary_ndims = int(d * partial_rotary_factor)``, ``query_rot,
query_pass = q[..., :rotary_ndims], q[..., rotary_ndims:]``, ``apply_rotary_pos_emb`` (``rotate_half``, ``cos``
and ``sin`` ``[B, T, rotary_ndims]`` unsqueezed at dim 1), ``torch.cat((query_rot, query_pass), dim=-1)``;
``softmax(..., dtype=float32)``; ``dense``.

Bugs (argument): ``table-head-width``: the rotary table built over the whole head width
(``PersimmonRotaryEmbedding(head_dim)``, ``partial_rotary_factor`` not passed on) and cut to fit,
``cos[..., :rotary_ndims]``: the cut keeps ``freqs`` once, not ``cat((freqs, freqs))``, so ``rotate_half`` pairs
feature i with i + r/2 at two different frequencies and the rotation is no rotation; ``qk-norm-after-transpose``:
the LayerNorm built over ``(H, d)`` (``nn.LayerNorm((H, d))``, the elementwise shape OLMo 2 uses over the whole
width) on the ``(B, T, H, d)`` layout: q and k normalised across all heads of a token, not per head.

Twin (correct): ``rotate-the-pass``: the rotary applied to the last ``rotary_ndims`` features and the first ones
passed. Against Persimmon's checkpoint it is wrong, but in a model whose projection is learnt the order of a
head's features is a free choice: q and k are rotated alike, so the scores are a function of relative position
as before (a permutation of the projection's rows makes it the correct file)."""

import math
import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class PersimmonRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=25000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, position_ids):                                             # (B, T)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class PersimmonAttention(nn.Module):
    def __init__(self, dim, heads, partial_rotary_factor=0.5, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.rotary_ndims = int(self.head_dim * partial_rotary_factor)
        self.query_key_value = nn.Linear(dim, 3 * dim)
        self.dense = nn.Linear(dim, dim)
        shape = (heads, self.head_dim) if bug == "qk-norm-after-transpose" else self.head_dim
        self.q_layernorm, self.k_layernorm = nn.LayerNorm(shape), nn.LayerNorm(shape)
        self.rotary_emb = PersimmonRotaryEmbedding(self.head_dim if bug == "table-head-width" else self.rotary_ndims)

    def _split_heads(self, fused_qkv):                                           # (B, T, 3*D)
        B, T, _ = fused_qkv.shape
        fused_qkv = fused_qkv.view(B, T, self.heads, 3, self.head_dim)
        return fused_qkv[..., 0, :], fused_qkv[..., 1, :], fused_qkv[..., 2, :]

    def rotate(self, x, cos, sin):                                               # (B, H, T, d)
        r = self.rotary_ndims
        if self.bug == "rotate-the-pass":
            x_pass, x_rot = x[..., :-r], x[..., -r:]
            return torch.cat((x_pass, x_rot * cos + rotate_half(x_rot) * sin), dim=-1)
        x_rot, x_pass = x[..., :r], x[..., r:]
        return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)

    def forward(self, hidden_states, position_ids):                              # (B, T, D), (B, T)
        B, T, _ = hidden_states.shape
        q, k, v = self._split_heads(self.query_key_value(hidden_states))
        q, k = self.q_layernorm(q), self.k_layernorm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        cos, sin = self.rotary_emb(position_ids)
        cos, sin = cos[..., : self.rotary_ndims].unsqueeze(1), sin[..., : self.rotary_ndims].unsqueeze(1)
        q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        causal = torch.full((T, T), torch.finfo(scores.dtype).min).triu(1)
        probs = nn.functional.softmax(scores + causal, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, -1)
        return self.dense(out)


BUGS = ("table-head-width", "qk-norm-after-transpose")
TWINS = ("rotate-the-pass",)
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    model = PersimmonAttention(D, H, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.arange(T).expand(B, T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
