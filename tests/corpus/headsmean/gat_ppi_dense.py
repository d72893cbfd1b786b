"""gordicaleksa/pytorch-GAT, models/definitions/GAT.py (``GAT`` built from ``GATLayerImp2``, the PPI configuration
``num_heads_per_layer=[4, 4, 6]``, ``concat`` True on the hidden layers and False on the last): dense multi-head
graph attention over N nodes, no batch. Each layer: ``linear_proj(x).view(-1, NH, FOUT)`` ``(N, NH, FOUT)``;
``scores_source = torch.sum(proj * scoring_fn_source, dim=-1, keepdim=True)`` ``(N, NH, 1)``, ``.transpose(0, 1)``;
the target scores ``.permute(1, 2, 0)`` ``(NH, 1, N)``; ``LeakyReLU`` of their sum plus the ``(N, N)``
connectivity mask, ``Softmax(dim=-1)``; ``torch.bmm(att, proj.transpose(0, 1))`` ``(NH, N, FOUT)`` and
``.permute(1, 0, 2)``. The hidden layer concatenates its heads (``view(-1, NH * FOUT)``) and applies ELU; the
output layer averages them (``out_nodes_features.mean(dim=self.head_dim)``, ``head_dim = 1``: Velickovic et al.
2018, eq. 6, "we employ averaging, and delay applying the final nonlinearity"). Here two layers, the same NH.

Bugs: ``hidden-heads-summed``: the hidden layer sums its heads (``sum(dim=1)``) where it concatenates them (the
next layer then reads FOUT features); ``mean-over-nodes``: the output layer averages over the nodes
(``mean(dim=0)``) instead of the heads, one row per head left."""

import sys

import torch
from torch import nn


class GATLayer(nn.Module):
    head_dim = 1

    def __init__(self, num_in_features, num_out_features, num_of_heads, concat=True, bug=""):
        super().__init__()
        self.nh, self.fout, self.concat, self.bug = num_of_heads, num_out_features, concat, bug
        self.linear_proj = nn.Linear(num_in_features, num_of_heads * num_out_features, bias=False)
        self.scoring_fn_source = nn.Parameter(torch.randn(1, num_of_heads, num_out_features))
        self.scoring_fn_target = nn.Parameter(torch.randn(1, num_of_heads, num_out_features))
        self.leakyReLU = nn.LeakyReLU(0.2)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, connectivity_mask):                                          # (N, FIN), (N, N)
        proj = self.linear_proj(x).view(-1, self.nh, self.fout)                      # (N, NH, FOUT)
        scores_source = torch.sum(proj * self.scoring_fn_source, dim=-1, keepdim=True)  # (N, NH, 1)
        scores_target = torch.sum(proj * self.scoring_fn_target, dim=-1, keepdim=True)  # (N, NH, 1)
        scores_source = scores_source.transpose(0, 1)                               # (NH, N, 1)
        scores_target = scores_target.permute(1, 2, 0)                              # (NH, 1, N)
        all_scores = self.leakyReLU(scores_source + scores_target)                  # (NH, N, N)
        attention = self.softmax(all_scores + connectivity_mask)                    # (NH, N, N)
        out = torch.bmm(attention, proj.transpose(0, 1))                            # (NH, N, FOUT)
        out = out.permute(1, 0, 2).contiguous()                                     # (N, NH, FOUT) [gat-out]
        if self.concat and self.bug == "hidden-heads-summed":
            return out.sum(dim=self.head_dim)                                       # (N, FOUT) [bug-summed]
        if self.concat:
            return out.view(-1, self.nh * self.fout)                                # (N, NH*FOUT) [gat-concat]
        if self.bug == "mean-over-nodes":
            return out.mean(dim=0)                                                  # (NH, FOUT) [bug-nodes]
        return out.mean(dim=self.head_dim)                                          # (N, FOUT) [gat-mean]


class GAT(nn.Module):
    def __init__(self, fin, nh, fout, bug=""):
        super().__init__()
        hidden = fout if bug == "hidden-heads-summed" else nh * fout
        self.layer1 = GATLayer(fin, fout, nh, concat=True, bug=bug)
        self.layer2 = GATLayer(hidden, fout, nh, concat=False, bug=bug)
        self.bias = nn.Parameter(torch.zeros(fout))
        self.activation = nn.ELU()

    def forward(self, x, mask):                                                      # (N, FIN), (N, N)
        h = self.activation(self.layer1(x, mask))                                    # (N, NH*FOUT)
        return self.layer2(h, mask) + self.bias                                      # (N, FOUT)


BUGS = ("hidden-heads-summed", "mean-over-nodes")
TWINS = ()
DIMS = ("T=7 D=16 H=4",)
EQUAL = {"T=7 D=16 H=4": "T=4 D=16 H=4"}


def build(bug="", T=7, D=16, H=4):
    torch.manual_seed(0)
    adj = (torch.rand(T, T) < 0.4) | torch.eye(T, dtype=torch.bool)
    adj = adj | adj.T
    mask = torch.zeros(T, T).masked_fill(~adj, float("-inf"))                      # (N, N)
    return GAT(D, H, D // H, bug=bug).eval(), (torch.randn(T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
