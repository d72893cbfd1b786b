"""juho-lee/set_transformer, modules.py (``MAB``, ``PMA``; https://github.com/juho-lee/set_transformer):
learned seed vectors as the queries (``self.S = nn.Parameter(torch.Tensor(1, num_seeds, dim))``,
``self.mab(self.S.repeat(X.size(0), 1, 1), X)``); heads split along the features and stacked on the
batch, head-major: ``Q_ = torch.cat(Q.split(dim_split, 2), 0)`` (``(H·B, n, d)``); ``A =
torch.softmax(Q_.bmm(K_.transpose(1, 2)) / math.sqrt(self.dim_V), 2)``; merged back ``O = torch.cat((Q_ +
A.bmm(V_)).split(Q.size(0), 0), 2)``; ``O = O + F.relu(self.fc_o(O))``.

Bugs (argument): ``merge-split-by-heads``: ``split(self.num_heads, 0)`` for ``split(Q.size(0), 0)``: the
chunks taken by the head count, not the batch size; the shapes only agree when B = H, where each output
row holds one batch entry's heads spread over the batch (traced at B = H = 4 only: it raises otherwise);
``softmax-seeds``: ``torch.softmax(..., 1)``: normalised over the seeds (the queries)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("merge-split-by-heads", "softmax-seeds")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MAB(nn.Module):
    def __init__(self, dim_Q, dim_K, dim_V, num_heads, bug=""):  # noqa: N803
        super().__init__()
        self.dim_V, self.num_heads, self.bug = dim_V, num_heads, bug
        self.fc_q = nn.Linear(dim_Q, dim_V)
        self.fc_k = nn.Linear(dim_K, dim_V)
        self.fc_v = nn.Linear(dim_K, dim_V)
        self.fc_o = nn.Linear(dim_V, dim_V)

    def forward(self, Q, K):  # noqa: N803
        Q = self.fc_q(Q)  # (B, nS, D)
        K, V = self.fc_k(K), self.fc_v(K)  # (B, T, D)
        dim_split = self.dim_V // self.num_heads
        Q_ = torch.cat(Q.split(dim_split, 2), 0)  # (H·B, nS, d_k)
        K_ = torch.cat(K.split(dim_split, 2), 0)  # (H·B, T, d_k)
        V_ = torch.cat(V.split(dim_split, 2), 0)  # (H·B, T, d_k)
        A = torch.softmax(Q_.bmm(K_.transpose(1, 2)) / math.sqrt(self.dim_V), 1 if self.bug == "softmax-seeds" else 2)
        chunk = self.num_heads if self.bug == "merge-split-by-heads" else Q.size(0)  # bug: the head count
        O = torch.cat((Q_ + A.bmm(V_)).split(chunk, 0), 2)  # (B, nS, D)  # noqa: E741
        return O + F.relu(self.fc_o(O))


class PMA(nn.Module):
    def __init__(self, dim=32, num_heads=4, num_seeds=3, bug=""):
        super().__init__()
        self.S = nn.Parameter(torch.Tensor(1, num_seeds, dim))
        nn.init.xavier_uniform_(self.S)
        self.mab = MAB(dim, dim, dim, num_heads, bug)

    def forward(self, X):  # noqa: N803
        return self.mab(self.S.repeat(X.size(0), 1, 1), X)  # (B, nS, D)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': a set of T elements per batch entry, pooled to 3 seeds."""
    torch.manual_seed(0)
    return PMA(D, H, 3, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
