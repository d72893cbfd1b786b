"""AlexHex7/Non-local_pytorch, ``lib/non_local_embedded_gaussian.py`` (2019, ``_NonLocalBlockND`` with
``dimension=2``, ``sub_sample=True``, after Wang et al.'s Non-local Neural Networks and
facebookresearch/video-nonlocal-net): 1x1 convolutions ``theta``, ``phi``, ``g`` to ``inter_channels = C // 2``;
``phi`` and ``g`` followed by ``MaxPool2d(2)`` (the keys and values subsampled: a quarter of the positions);
``g_x = self.g(x).view(b, self.inter_channels, -1).permute(0, 2, 1)``, ``theta_x`` the same, ``phi_x`` left
``(b, C', N/4)``; ``f = torch.matmul(theta_x, phi_x)``, ``F.softmax(f, dim=-1)``, ``y = torch.matmul(f_div_C,
g_x)``, ``y.permute(0, 2, 1).contiguous().view(b, self.inter_channels, *x.size()[2:])``, ``W`` (a 1x1
convolution back to ``C``), ``z = W_y + x``.

Bugs: ``y-view-without-permute``: ``y.view(b, self.inter_channels, *x.size()[2:])`` straight from the
``(b, N, C')`` product (the ``permute(0, 2, 1)`` forgotten, the slip of the repository's issue about the
``contiguous()`` that follows it: positions and channels interleave); ``softmax-over-queries``:
``F.softmax(f, dim=1)`` (each key's weights normalised over the queries, the slip of the ``(b, C, N)`` layout
where dim 1 is the reduced one)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class NonLocalBlock2D(nn.Module):
    def __init__(self, in_channels, bug=""):
        super().__init__()
        self.bug = bug
        self.in_channels, self.inter_channels = in_channels, in_channels // 2
        self.g = nn.Sequential(nn.Conv2d(in_channels, self.inter_channels, 1), nn.MaxPool2d(kernel_size=(2, 2)))
        self.theta = nn.Conv2d(in_channels, self.inter_channels, 1)
        self.phi = nn.Sequential(nn.Conv2d(in_channels, self.inter_channels, 1), nn.MaxPool2d(kernel_size=(2, 2)))
        self.W = nn.Conv2d(self.inter_channels, in_channels, 1)

    def forward(self, x):
        batch_size = x.size(0)
        g_x = self.g(x).view(batch_size, self.inter_channels, -1).permute(0, 2, 1)          # (b, N/4, C')
        theta_x = self.theta(x).view(batch_size, self.inter_channels, -1).permute(0, 2, 1)  # (b, N, C')
        phi_x = self.phi(x).view(batch_size, self.inter_channels, -1)                       # (b, C', N/4)
        f = torch.matmul(theta_x, phi_x)                                                    # (b, N, N/4)
        f_div_C = F.softmax(f, dim=1 if self.bug == "softmax-over-queries" else -1)
        y = torch.matmul(f_div_C, g_x)                                                      # (b, N, C')
        if self.bug != "y-view-without-permute":
            y = y.permute(0, 2, 1).contiguous()
        y = y.view(batch_size, self.inter_channels, *x.size()[2:])
        return self.W(y) + x


BUGS = ("y-view-without-permute", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 D=16 Hp=4 Wp=6",)
EQUAL = {"B=2 D=16 Hp=4 Wp=6": "B=4 D=16 Hp=4 Wp=4"}


def build(bug="", B=2, D=16, Hp=4, Wp=6):
    torch.manual_seed(0)
    return NonLocalBlock2D(D, bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
