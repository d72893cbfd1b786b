"""gjylt/DoubleAttentionNet issue #3 ("Wrong softmax for attention maps?", closed as solved): the A²-Net double
attention block gathers global descriptors with attention maps over the pixels — ``softmaxB`` must
normalise each of the ``c_n`` maps over its ``K·h·w`` positions — but the code normalised ``tmpB``
``(batch, c_n, K·h·w)`` with ``nn.Softmax(dim=1)``, over the ``c_n`` maps at each pixel. The reporter's fix:
``F.softmax(tmpB, dim=-1)``. (The second softmax, the distribution step, is over the ``c_n`` descriptors
at each pixel, and is right as it is.)

The project's idiom: three 1×1 ``Conv2d`` (``convA``/``convB``/``convV``), ``view``/``permute`` to
``(batch, c_m, K·h·w)`` and ``(batch, c_n, K·h·w)``, ``tmpA.matmul(softmaxB)`` the ``(batch, c_m, c_n)``
descriptors, ``tmpG.matmul(softmaxV)`` back to ``(batch, c_m, K·h·w)``, viewed ``(b, c_m, h, w)``; here
K = 1 and ``c_m = c_n = D`` (the channels named by ``D``).

Bug (argument): ``maps-over-channels``: the gathering softmax over the maps instead of the pixels."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("maps-over-channels",)
TWINS = ()
DIMS = ("B=2 D=32",)


class DoubleAttentionLayer(nn.Module):
    def __init__(self, in_channels, c_m, c_n, K=1, bug=""):
        super().__init__()
        self.K, self.c_m, self.c_n, self.bug = K, c_m, c_n, bug
        self.convA = nn.Conv2d(in_channels, c_m, 1)
        self.convB = nn.Conv2d(in_channels, c_n, 1)
        self.convV = nn.Conv2d(in_channels, c_n, 1)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        b, c, h, w = x.size()
        batch = b // self.K
        A, B, V = self.convA(x), self.convB(x), self.convV(x)                            # (b, c_*, h, w)
        tmpA = A.view(batch, self.K, self.c_m, h * w).permute(0, 2, 1, 3).reshape(batch, self.c_m, self.K * h * w)
        tmpB = B.view(batch, self.K, self.c_n, h * w).permute(0, 2, 1, 3).reshape(batch, self.c_n, self.K * h * w)
        tmpV = V.view(batch, self.K, self.c_n, h * w).permute(0, 1, 3, 2).reshape(batch, self.K * h * w, self.c_n)
        if self.bug == "maps-over-channels":
            softmaxB = self.softmax(tmpB).permute(0, 2, 1)                  # (batch, K*h*w, c_n) [gather]
        else:
            softmaxB = F.softmax(tmpB, dim=-1).permute(0, 2, 1)            # (batch, K*h*w, c_n) [gather]
        tmpG = tmpA.matmul(softmaxB)                                        # (batch, c_m, c_n)
        softmaxV = F.softmax(tmpV, dim=-1).permute(0, 2, 1)                 # (batch, c_n, K*h*w)
        tmpZ = tmpG.matmul(softmaxV)                                        # (batch, c_m, K*h*w)
        return tmpZ.view(batch, self.c_m, self.K, h * w).permute(0, 2, 1, 3).reshape(b, self.c_m, h, w)


def build(bug="", B=2, D=32):
    torch.manual_seed(0)
    return DoubleAttentionLayer(D, D, D, bug=bug).eval(), (torch.randn(B, D, 3, 5),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
