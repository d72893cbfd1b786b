"""Diego999/pyGAT, layers.py (``GraphAttentionLayer``) and models.py (``GAT``), master (2021): dense graph
attention over N nodes, no batch: ``Wh = torch.mm(h, self.W)`` ``(N, F')``; ``_prepare_attentional_mechanism_input``:
``Wh1 = torch.matmul(Wh, self.a[:F', :])``, ``Wh2 = torch.matmul(Wh, self.a[F':, :])``, ``e = Wh1 + Wh2.T``
``(N, N)`` (by broadcast), ``leakyrelu``; ``attention = torch.where(adj > 0, e, -9e15 * ones_like(e))``,
``F.softmax(attention, dim=1)``, ``h_prime = torch.matmul(attention, Wh)``, ELU; the heads
``torch.cat([att(x, adj) for att in self.attentions], dim=1)`` and an output layer over them,
``F.log_softmax(x, dim=1)``.

Bugs (argument): ``e-without-transpose``: ``e = Wh1 + Wh2`` (the ``.T`` dropped: ``(N, 1)``, broadcast over the
neighbours by ``torch.where``: every neighbour of a node gets the same logit, as pyGAT's issue on the ``a``
split discusses for hand ports); ``softmax-over-sources``: ``F.softmax(attention, dim=0)`` (each node's
weights normalised over the nodes that attend to it, the transposed reading of a symmetric adjacency)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class GraphAttentionLayer(nn.Module):
    def __init__(self, in_features, out_features, alpha=0.2, concat=True, bug=""):
        super().__init__()
        self.out_features, self.concat, self.bug = out_features, concat, bug
        self.W = nn.Parameter(torch.empty(size=(in_features, out_features)))
        nn.init.xavier_uniform_(self.W.data, gain=1.414)
        self.a = nn.Parameter(torch.empty(size=(2 * out_features, 1)))
        nn.init.xavier_uniform_(self.a.data, gain=1.414)
        self.leakyrelu = nn.LeakyReLU(alpha)

    def forward(self, h, adj):                                                     # (N, F), (N, N)
        Wh = torch.mm(h, self.W)                                                     # (N, F')
        e = self._prepare_attentional_mechanism_input(Wh)
        zero_vec = -9e15 * torch.ones_like(e)
        attention = torch.where(adj > 0, e, zero_vec)
        attention = F.softmax(attention, dim=0 if self.bug == "softmax-over-sources" else 1)
        h_prime = torch.matmul(attention, Wh)
        return F.elu(h_prime) if self.concat else h_prime

    def _prepare_attentional_mechanism_input(self, Wh):
        Wh1 = torch.matmul(Wh, self.a[: self.out_features, :])                       # (N, 1)
        Wh2 = torch.matmul(Wh, self.a[self.out_features :, :])
        e = Wh1 + Wh2 if self.bug == "e-without-transpose" else Wh1 + Wh2.T          # (N, N)
        return self.leakyrelu(e)


class GAT(nn.Module):
    def __init__(self, nfeat, nhid, nclass, nheads, bug=""):
        super().__init__()
        self.attentions = nn.ModuleList([GraphAttentionLayer(nfeat, nhid, bug=bug) for _ in range(nheads)])
        self.out_att = GraphAttentionLayer(nhid * nheads, nclass, concat=False, bug=bug)

    def forward(self, x, adj):
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)               # (N, H*F')
        x = F.elu(self.out_att(x, adj))
        return F.log_softmax(x, dim=1)


BUGS = ("e-without-transpose", "softmax-over-sources")
TWINS = ()
DIMS = ("T=7 D=16 H=4",)
EQUAL = {"T=7 D=16 H=4": "T=4 D=16 H=4"}


def build(bug="", T=7, D=16, H=4):
    torch.manual_seed(0)
    adj = (torch.rand(T, T) < 0.4).float()
    adj = ((adj + adj.T + torch.eye(T)) > 0).float()                                # symmetric, self-loops
    return GAT(D, 8, 3, H, bug).eval(), (torch.randn(T, D), adj)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
