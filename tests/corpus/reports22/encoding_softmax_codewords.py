"""zhanghang1989/PyTorch-Encoding issue #114 ("discrepancy of softmax dimension in the encoding code?") and pull
request #115 ("fix softmax dimension bug"; zhanghang1989: "Sorry about the mistake. That is a bug introduced in an
early commit"): the ``Encoding`` layer (EncNet) computes, for each of N descriptors and K learned codewords, the
scaled distance ``scaledL2(X, C, s)`` of shape ``B×N×K`` and soft-assigns each descriptor over the codewords,
``A = softmax(SL, dim=2)``; the bug normalised ``dim=1``, over the descriptors, so each codeword's weights summed
to 1 across the image and a descriptor's weights across codewords did not. The aggregation ``E = Σ_n A[b,n,k]
(X[b,n] − C[k])`` then gives ``B×K×D``.

The idiom: ``X.view(B, D, -1).transpose(1, 2).contiguous()`` from a ``B×D×H×W`` feature map (here the N
descriptors are T tokens entered ``[B, T, D]``), ``scaled_l2`` written with broadcasting
(``(X.unsqueeze(2) - C.unsqueeze(0).unsqueeze(0)).pow(2).sum(3) * s``), ``F.softmax``, and ``aggregate``
as ``(A.unsqueeze(3) * (X.unsqueeze(2) - C.unsqueeze(0).unsqueeze(0))).sum(1)``. K = H (codewords).

Bug (softmax axis): ``softmax-over-descriptors``: ``F.softmax(SL, dim=1)``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-over-descriptors",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def scaled_l2(X, C, S):
    return (X.unsqueeze(2) - C.unsqueeze(0).unsqueeze(0)).pow(2).sum(3) * S.view(1, 1, -1)


def aggregate(A, X, C):
    return (A.unsqueeze(3) * (X.unsqueeze(2) - C.unsqueeze(0).unsqueeze(0))).sum(1)


class Encoding(nn.Module):
    def __init__(self, D, K, bug=""):
        super().__init__()
        self.D, self.K, self.bug = D, K, bug
        std1 = 1.0 / ((K * D) ** 0.5)
        self.codewords = nn.Parameter(torch.empty(K, D).uniform_(-std1, std1))
        self.scale = nn.Parameter(torch.empty(K).uniform_(-1, 0))

    def forward(self, X):
        SL = scaled_l2(X, self.codewords, self.scale)
        A = F.softmax(SL, dim=1 if self.bug == "softmax-over-descriptors" else 2)
        E = aggregate(A, X, self.codewords)
        return E


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Encoding(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
