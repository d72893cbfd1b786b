"""neonbjb/tortoise-tts, tortoise/models/arch_util.py (v3.0.0, ``AttentionBlock``, ``QKVAttentionLegacy``,
``normalization`` = ``GroupNorm32(32, C)``): attention over a channels-first ``[B, C, T]`` signal, a ``Conv1d(C,
3C, 1)`` ``qkv``, the heads folded batch-major by ``qkv.reshape(bs * n_heads, ch * 3, length).split(ch, dim=1)``,
``einsum("bct,bcs->bts", q * scale, k * scale)`` with ``scale = 1 / sqrt(sqrt(ch))``, ``softmax(weight.float(),
dim=-1)``, ``einsum("bts,bcs->bct", weight, v)``, ``reshape(bs, -1, length)`` and a ``Conv1d(C, C, 1)``
``proj_out`` with a residual. The key padding mask ``[B, T]`` is folded over the heads to ``[B·H, 1, T]``.

Bugs: ``mask-repeat-head-major``: the public code's ``mask.repeat(self.n_heads, 1).unsqueeze(1)`` (the lengths
tiled head-major while the ``bs * n_heads`` fold of ``qkv`` is batch-major: every head but the first of a batch
entry reads another entry's mask; tortoise-tts passes ``mask=None`` in its own models, so the slip is latent);
``softmax-over-queries``: ``torch.softmax(weight.float(), dim=1)`` (over ``t``, the queries, of ``bts``: the
slip of reading the einsum's letters in the wrong order)."""

import math
import sys

import torch
from torch import nn


class GroupNorm32(nn.GroupNorm):
    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


class QKVAttentionLegacy(nn.Module):
    def __init__(self, n_heads, bug=""):
        super().__init__()
        self.n_heads, self.bug = n_heads, bug

    def forward(self, qkv, mask=None):
        bs, width, length = qkv.shape
        ch = width // (3 * self.n_heads)
        q, k, v = qkv.reshape(bs * self.n_heads, ch * 3, length).split(ch, dim=1)
        scale = 1 / math.sqrt(math.sqrt(ch))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)
        if mask is not None:
            if self.bug == "mask-repeat-head-major":
                mask = mask.repeat(self.n_heads, 1).unsqueeze(1)
            else:
                mask = mask.repeat_interleave(self.n_heads, dim=0).unsqueeze(1)
            weight = weight.masked_fill(~mask, float("-inf"))
        weight = torch.softmax(weight.float(), dim=1 if self.bug == "softmax-over-queries" else -1).type(weight.dtype)
        a = torch.einsum("bts,bcs->bct", weight, v)
        return a.reshape(bs, -1, length)


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_heads, bug=""):
        super().__init__()
        self.norm = GroupNorm32(32, channels)
        self.qkv = nn.Conv1d(channels, channels * 3, 1)
        self.attention = QKVAttentionLegacy(num_heads, bug)
        self.proj_out = nn.Conv1d(channels, channels, 1)

    def forward(self, x, mask=None):
        b, c, *spatial = x.shape
        x = x.reshape(b, c, -1)
        qkv = self.qkv(self.norm(x))
        h = self.attention(qkv, mask)
        h = self.proj_out(h)
        return (x + h).reshape(b, c, *spatial)


BUGS = ("mask-repeat-head-major", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    """The signal ``[B, D, T]`` channels-first (a mel or latent sequence), with a key padding mask ``[B, T]``."""
    torch.manual_seed(0)
    model = AttentionBlock(D, H, bug).eval()
    lengths = torch.tensor([T - 2 * (i % 2) for i in range(B)])
    mask = torch.arange(T)[None, :] < lengths[:, None]
    return model, (torch.randn(B, D, T), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
