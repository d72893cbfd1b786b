"""pytorch/pytorch, torch/nn/attention/flex_attention.py (v2.5, ``flex_attention``'s documented semantics: "the
score_mod function ... ``score_mod(score, b, h, q_idx, kv_idx)``" applied to every ``q @ k.transpose(-2, -1) *
scale`` entry, and a ``mask_mod(b, h, q_idx, kv_idx)`` whose False entries are ``-inf``) with the attention-gym
examples (meta-pytorch/attention-gym, ``attn_gym/mods/alibi.py`` ``generate_alibi_bias``: ``score + slopes[h] *
(kv_idx - q_idx)``; ``attn_gym/masks/sliding_window.py``: ``causal & (q_idx - kv_idx <= window)``), written as
the eager reference the docs give: ``b``, ``h``, ``q_idx`` and ``kv_idx`` as broadcasting ``arange`` index
tensors of shapes ``(B, 1, 1, 1)``, ``(1, H, 1, 1)``, ``(1, 1, T, 1)`` and ``(1, 1, 1, T)``.

Bugs (argument): ``alibi-reversed``: ``slopes[h] * (q_idx - kv_idx)`` (the distance taken the other way round:
with a negative slope per head the nearest keys then get the largest penalty, the sign slip ALiBi ports make);
``causal-reversed``: ``q_idx <= kv_idx`` in the mask_mod (each query sees the future and itself, not the past)."""

import sys

import torch
from torch import nn


def alibi_slopes(num_heads):
    return torch.tensor([2 ** (-8 * (i + 1) / num_heads) for i in range(num_heads)])


class FlexAttention(nn.Module):
    def __init__(self, dim, heads, bug="", window=3):
        super().__init__()
        self.heads, self.head_dim, self.bug, self.window = heads, dim // heads, bug, window
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.register_buffer("slopes", -alibi_slopes(heads), persistent=False)    # negative: a penalty

    def score_mod(self, score, b, h, q_idx, kv_idx):
        distance = q_idx - kv_idx if self.bug == "alibi-reversed" else kv_idx - q_idx
        return score - self.slopes[h] * distance

    def mask_mod(self, b, h, q_idx, kv_idx):
        causal = q_idx <= kv_idx if self.bug == "causal-reversed" else q_idx >= kv_idx
        return causal & (q_idx - kv_idx <= self.window)

    def flex_attention(self, query, key, value):                                   # (B, H, T, d)
        B, H, T, _ = query.shape
        scores = query @ key.transpose(-2, -1) * self.head_dim**-0.5               # (B, H, T, T)
        b = torch.arange(B)[:, None, None, None]
        h = torch.arange(H)[None, :, None, None]
        q_idx = torch.arange(T)[None, None, :, None]
        kv_idx = torch.arange(T)[None, None, None, :]
        scores = self.score_mod(scores, b, h, q_idx, kv_idx)
        scores = scores.masked_fill(~self.mask_mod(b, h, q_idx, kv_idx), float("-inf"))
        return scores.softmax(dim=-1) @ value                                       # (B, H, T, d)

    def forward(self, x):                                                            # (B, T, D)
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.heads, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        out = self.flex_attention(q, k, v)
        return self.o(out.transpose(1, 2).reshape(B, T, D))


BUGS = ("alibi-reversed", "causal-reversed")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return FlexAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
