"""pyg-team/pytorch_geometric, torch_geometric/nn/conv/gat_conv.py (``GATConv``, ``concat=False``) with
``torch_geometric.utils.softmax`` (its scatter form) and ``MessagePassing``'s ``aggr="add"``, written in plain
torch on an edge list ``edge_index`` ``(2, E)`` (self-loops added): ``x = self.lin(x).view(-1, H, C)`` ``(N, H,
C)``; ``alpha_src = (x * self.att_src).sum(dim=-1)`` ``(N, H)``, ``alpha_dst`` the same; per edge
``alpha = alpha_src[src] + alpha_dst[dst]`` ``(E, H)``, ``F.leaky_relu(alpha, 0.2)``, a softmax over the edges
that share a target (``scatter(..., reduce="max")``, ``exp``, ``scatter(..., reduce="sum")``, each read back with
``index_select``); the message ``x_j * alpha.unsqueeze(-1)`` ``(E, H, C)`` added into the targets ``(N, H, C)``;
then, with ``concat=False``, ``out = out.mean(dim=1)`` ``(N, C)`` and the bias.

Bugs: ``lin-view-channels-first``: the projection read ``view(-1, C, H).transpose(1, 2)``, as if its ``H * C``
outputs were channel-major; ``mean-over-nodes``: ``out.mean(dim=0)`` ``(H, C)``, the nodes averaged instead of the
heads."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def softmax(src, index, num_nodes):                                                # (E, H), (E,)
    """torch_geometric.utils.softmax: a softmax over the entries of ``src`` that share an ``index``."""
    heads = src.size(1)
    src_max = torch.full((num_nodes, heads), float("-inf")).index_reduce(0, index, src, "amax")  # (N, H)
    out = (src - src_max.index_select(0, index)).exp()                                # (E, H)
    out_sum = torch.zeros(num_nodes, heads).index_add(0, index, out) + 1e-16          # (N, H)
    return out / out_sum.index_select(0, index)                                       # (E, H)


class GATConv(nn.Module):
    def __init__(self, in_channels, out_channels, heads, bug=""):
        super().__init__()
        self.heads, self.out_channels, self.bug = heads, out_channels, bug
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.randn(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.randn(1, heads, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, edge_index):                                                # (N, F), (2, E)
        H, C = self.heads, self.out_channels
        if self.bug == "lin-view-channels-first":
            x = self.lin(x).view(-1, C, H).transpose(1, 2)                           # (N, H, C) [bug-view]
        else:
            x = self.lin(x).view(-1, H, C)                                           # (N, H, C) [pyg-view]
        alpha_src = (x * self.att_src).sum(dim=-1)                                   # (N, H)
        alpha_dst = (x * self.att_dst).sum(dim=-1)                                   # (N, H)
        src, dst = edge_index[0], edge_index[1]                                      # (E,), (E,)
        alpha = alpha_src.index_select(0, src) + alpha_dst.index_select(0, dst)      # (E, H)
        alpha = softmax(F.leaky_relu(alpha, 0.2), dst, x.size(0))                    # (E, H)
        msg = x.index_select(0, src) * alpha.unsqueeze(-1)                           # (E, H, C)
        out = torch.zeros_like(x).index_add(0, dst, msg)                             # (N, H, C) [pyg-out]
        if self.bug == "mean-over-nodes":
            out = out.mean(dim=0)                                                    # (H, C) [bug-nodes]
        else:
            out = out.mean(dim=1)                                                    # (N, C) [pyg-mean]
        return out + self.bias


BUGS = ("lin-view-channels-first", "mean-over-nodes")
TWINS = ()
DIMS = ("T=7 D=16 H=4",)
EQUAL = {"T=7 D=16 H=4": "T=4 D=16 H=4"}


def build(bug="", T=7, D=16, H=4):
    torch.manual_seed(0)
    edges = torch.randint(0, T, (2, 3 * T))
    loops = torch.arange(T).expand(2, T)
    edge_index = torch.cat([edges, loops], dim=1)                                     # (2, E)
    return GATConv(D, D // H, H, bug=bug).eval(), (torch.randn(T, D), edge_index)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
