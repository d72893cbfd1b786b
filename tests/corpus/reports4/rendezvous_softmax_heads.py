"""CAMMA-public/rendezvous issue #10 ("Question About Softmax in Pytorch Code"; the maintainer: "This is a
typo and will updated in the next commit. The original code in TensorFlow has the right softmax dim."):
the PyTorch port's ``MHMA.scale_dot_product`` built attention weights ``[B, Head, D, D]`` (the internal
channels attending to each other) and normalised them with ``nn.Softmax(dim=1)``, over the four heads:
each head's weights no longer summed to one over the keys, and the heads were made to compete. The
TensorFlow original, and the fix, use the last axis.

The repository's idiom: ``1×1`` convolutions for key, query and value on the feature map ``[B, C, H, W]``,
key and query pooled to one vector per channel (``[B, Head, D, 1]``), the value kept spatial
(``[B, Head, D, H·W]``), ``matmul(query, key^T) / sqrt(D)``, the softmax, ``matmul(attn, value)``, the
heads folded back into channels, a ``1×1`` output convolution and a residual.

Bug (argument): ``softmax-heads``: ``nn.Softmax(dim=1)`` over ``[B, Head, D, D]``."""

import sys

import torch
from torch import nn

BUGS = ("softmax-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MHMA(nn.Module):
    def __init__(self, depth, num_heads=4, bug=""):
        super().__init__()
        self.num_heads, self.depth = num_heads, depth
        self.key = nn.Conv2d(depth, depth, kernel_size=1)
        self.query = nn.Conv2d(depth, depth, kernel_size=1)
        self.value = nn.Conv2d(depth, depth, kernel_size=1)
        self.softmax = nn.Softmax(dim=1 if bug == "softmax-heads" else -1)
        self.out = nn.Conv2d(depth, depth, kernel_size=1)

    def scale_dot_product(self, key, value, query):
        dk = torch.sqrt(torch.tensor(query.shape[-2], dtype=torch.float32))
        attn = torch.matmul(query, key.transpose(-1, -2)) / dk                  # [B, Head, D, D]
        attn = self.softmax(attn)                                               # [softmax]
        return torch.matmul(attn, value)                                        # [B, Head, D, H*W]

    def forward(self, inputs):
        B, C, H, W = inputs.shape
        d = C // self.num_heads
        key = self.key(inputs).mean(dim=(-1, -2)).view(B, self.num_heads, d, 1)
        query = self.query(inputs).mean(dim=(-1, -2)).view(B, self.num_heads, d, 1)
        value = self.value(inputs).view(B, self.num_heads, d, H * W)
        att = self.scale_dot_product(key, value, query)
        att = att.reshape(B, C, H, W)
        return self.out(att) + inputs


def build(bug="", B=2, D=32, T=6, H=4):
    torch.manual_seed(0)
    return MHMA(D, H, bug).eval(), (torch.randn(B, D, T, T),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
