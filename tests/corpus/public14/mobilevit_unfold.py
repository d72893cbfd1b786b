"""huggingface/transformers, src/transformers/models/mobilevit/modeling_mobilevit.py (v4.40, ``MobileViTLayer
.unfolding``/``.folding``, ``MobileViTSelfAttention``): a feature map ``[B, C, H, W]`` cut into 2x2 patches with
``reshape(B * C * n_h, p_h, n_w, p_w).transpose(1, 2).reshape(B, C, N, P).transpose(1, 3).reshape(B * P, N, C)``,
attention over the N patches at each of the P pixel places (heads split with ``view`` and ``permute``), then
folded back the same way in reverse.

Bugs (argument): ``fold-without-transpose``: ``folding`` leaves out its ``transpose(1, 2)`` (reshaping
``(B C n_h, n_w, p_h, p_w)`` straight to ``(B, C, H, W)``, the slip of a port that drops the step whose shape
does not change the element count: pixels land in the wrong places)."""

import sys

import torch
from torch import nn


class MobileViTSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def split(self, x):
        return x.view(*x.shape[:-1], self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, hidden_states):                                            # (B P, N, C)
        q, k, v = self.split(self.query(hidden_states)), self.split(self.key(hidden_states)), \
            self.split(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.head_dim**0.5       # (B P, h, N, N)
        probs = nn.functional.softmax(scores, dim=-1)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()        # (B P, N, h, d)
        return self.out(context.view(*context.shape[:-2], -1))


class MobileViTLayer(nn.Module):
    def __init__(self, dim, heads, bug="", patch=2):
        super().__init__()
        self.bug, self.patch = bug, patch
        self.conv = nn.Conv2d(dim, dim, 1)
        self.norm = nn.LayerNorm(dim)
        self.attention = MobileViTSelfAttention(dim, heads)

    def unfolding(self, features):                                               # (B, C, H, W)
        B, C, H, W = features.shape
        p = self.patch
        n_h, n_w = H // p, W // p
        patches = features.reshape(B * C * n_h, p, n_w, p).transpose(1, 2)      # (B C n_h, n_w, p, p)
        patches = patches.reshape(B, C, n_h * n_w, p * p).transpose(1, 3)       # (B, P, N, C)
        return patches.reshape(B * p * p, n_h * n_w, C), (B, C, H, W)

    def folding(self, patches, shape):                                           # (B P, N, C)
        B, C, H, W = shape
        p = self.patch
        n_h, n_w = H // p, W // p
        features = patches.contiguous().view(B, p * p, n_h * n_w, C).transpose(1, 3)  # (B, C, N, P)
        features = features.reshape(B * C * n_h, n_w, p, p)
        if self.bug != "fold-without-transpose":
            features = features.transpose(1, 2)                                 # (B C n_h, p, n_w, p)
        return features.reshape(B, C, n_h * p, n_w * p)

    def forward(self, x):                                                        # (B, C, H, W)
        features = self.conv(x)
        patches, shape = self.unfolding(features)
        patches = patches + self.attention(self.norm(patches))
        return self.folding(patches, shape)


BUGS = ("fold-without-transpose",)
TWINS = ()
DIMS = ("B=2 D=32 H=4",)
EQUAL = {"B=2 D=32 H=4": "B=4 D=32 H=4"}


def build(bug="", B=2, D=32, H=4):
    torch.manual_seed(0)
    return MobileViTLayer(D, H, bug).eval(), (torch.randn(B, D, 4, 6),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
