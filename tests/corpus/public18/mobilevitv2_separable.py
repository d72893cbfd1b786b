"""apple/ml-cvnets, cvnets/layers/linear_attention.py (``LinearSelfAttention``) and
cvnets/modules/mobilevit_block.py (``MobileViTBlockv2.unfolding_pytorch`` / ``folding_pytorch``): the feature map
``(B, C, Hf, Wf)`` unfolded into patches with ``F.unfold(kernel_size=(ph, pw), stride=(ph, pw))`` and
``reshape(B, C, ph * pw, -1)`` ``(B, C, P, N)``; separable self-attention: ``qkv_proj`` a 1x1 Conv2d(C, 1 + 2C),
``torch.split(qkv, [1, C, C], dim=1)``, ``context_scores = F.softmax(query, dim=-1)`` (over the N patches of each
pixel position), ``context_vector = (key * context_scores).sum(dim=-1, keepdim=True)``, ``out = F.relu(value) *
context_vector.expand_as(value)``, ``out_proj`` a 1x1 Conv2d; folded back with ``F.fold``. Here ``D`` the
channels, ``Hp x Wp`` the feature map cut into 2 x 2 patches.

Bugs (argument): ``softmax-over-pixels``: ``F.softmax(query, dim=-2)`` (over the P pixels of a patch, the slip of
counting the axes of the ``(B, 1, P, N)`` scores from the wrong end); ``context-summed-over-channels``: the
context vector summed over ``dim=1`` (the channels) where the patches' ``dim=-1`` is meant."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class LinearSelfAttention(nn.Module):
    def __init__(self, embed_dim, bug=""):
        super().__init__()
        self.embed_dim, self.bug = embed_dim, bug
        self.qkv_proj = nn.Conv2d(embed_dim, 1 + 2 * embed_dim, kernel_size=1)
        self.out_proj = nn.Conv2d(embed_dim, embed_dim, kernel_size=1)

    def forward(self, x):                                                          # (B, C, P, N)
        qkv = self.qkv_proj(x)
        query, key, value = torch.split(qkv, [1, self.embed_dim, self.embed_dim], dim=1)
        context_scores = F.softmax(query, dim=-2 if self.bug == "softmax-over-pixels" else -1)
        context_vector = key * context_scores
        dim = 1 if self.bug == "context-summed-over-channels" else -1
        context_vector = torch.sum(context_vector, dim=dim, keepdim=True)
        out = F.relu(value) * context_vector.expand_as(value)
        return self.out_proj(out)


class MobileViTBlockv2(nn.Module):
    def __init__(self, channels, patch=2, bug=""):
        super().__init__()
        self.patch_h = self.patch_w = patch
        self.local_rep = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.GroupNorm(1, channels)
        self.attn = LinearSelfAttention(channels, bug)
        self.conv_proj = nn.Conv2d(channels, channels, 1)

    def unfolding_pytorch(self, feature_map):
        batch_size, in_channels, img_h, img_w = feature_map.shape
        patches = F.unfold(feature_map, kernel_size=(self.patch_h, self.patch_w), stride=(self.patch_h, self.patch_w))
        patches = patches.reshape(batch_size, in_channels, self.patch_h * self.patch_w, -1)
        return patches, (img_h, img_w)

    def folding_pytorch(self, patches, output_size):
        batch_size, in_dim, patch_size, n_patches = patches.shape
        patches = patches.reshape(batch_size, in_dim * patch_size, n_patches)
        return F.fold(patches, output_size=output_size, kernel_size=(self.patch_h, self.patch_w),
                      stride=(self.patch_h, self.patch_w))

    def forward(self, x):                                                          # (B, C, Hf, Wf)
        fm = self.local_rep(x)
        patches, output_size = self.unfolding_pytorch(fm)
        patches = patches + self.attn(self.norm(patches))
        fm = self.folding_pytorch(patches, output_size)
        return self.conv_proj(fm)


BUGS = ("softmax-over-pixels", "context-summed-over-channels")
TWINS = ()
DIMS = ("B=2 D=16 H=1 Hp=6 Wp=8",)
EQUAL = {"B=2 D=16 H=1 Hp=6 Wp=8": "B=4 D=16 H=1 Hp=4 Wp=4"}


def build(bug="", B=2, D=16, Hp=6, Wp=8):
    torch.manual_seed(0)
    return MobileViTBlockv2(D, bug=bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
