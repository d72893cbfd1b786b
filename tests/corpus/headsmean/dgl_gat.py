"""dmlc/dgl, python/dgl/nn/pytorch/conv/gatconv.py (``GATConv``) as examples/pytorch/gat/train.py stacks it: the
hidden layer's heads flattened (``h.flatten(1)``), the output layer's averaged (``h.mean(1)``), here in plain
torch on an edge list, with a batch of B graphs of N nodes each (``dgl.batch`` would lay them end to end; here a
leading axis). ``feat = self.fc(h).view(*h.shape[:-1], H, F)`` ``(B, N, H, F)``; ``el = (feat * self.attn_l).sum(
dim=-1).unsqueeze(-1)`` ``(B, N, H, 1)``, ``er`` the same; ``apply_edges(fn.u_add_v("el", "er", "e"))`` as
``el[:, src] + er[:, dst]`` ``(B, E, H, 1)``; ``leaky_relu``; ``edge_softmax`` over each target's in-edges;
``update_all(fn.u_mul_e("ft", "a", "m"), fn.sum("m", "ft"))`` as the messages ``feat[:, src] * a`` added into
the targets ``(B, N, H, F)``; the bias ``view(1, H, F)`` added per head. The model then flattens the hidden
layer's heads and averages the output layer's.

Bugs: ``hidden-heads-meaned``: the hidden layer's heads averaged (``mean(1)``, the output layer's line) where
the model flattens them (the next layer's input is F wide: it runs); ``mean-over-nodes``: the output layer's
``mean`` over the nodes instead of the heads."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def edge_softmax(e, dst, num_nodes):                                                # (B, E, H, 1), (E,)
    """dgl.ops.edge_softmax: a softmax over the in-edges of each target node."""
    B, _, H, _ = e.shape
    emax = torch.full((B, num_nodes, H, 1), float("-inf")).index_reduce(1, dst, e, "amax")  # (B, N, H, 1)
    a = (e - emax.index_select(1, dst)).exp()                                         # (B, E, H, 1)
    denom = torch.zeros(B, num_nodes, H, 1).index_add(1, dst, a)                      # (B, N, H, 1)
    return a / denom.index_select(1, dst)                                             # (B, E, H, 1)


class GATConv(nn.Module):
    def __init__(self, in_feats, out_feats, num_heads):
        super().__init__()
        self.num_heads, self.out_feats = num_heads, out_feats
        self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.randn(1, 1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.randn(1, 1, num_heads, out_feats))
        self.bias = nn.Parameter(torch.zeros(num_heads * out_feats))

    def forward(self, h, edge_index):                                                # (B, N, D), (2, E)
        src, dst = edge_index[0], edge_index[1]
        feat = self.fc(h).view(*h.shape[:-1], self.num_heads, self.out_feats)       # (B, N, H, F)
        el = (feat * self.attn_l).sum(dim=-1).unsqueeze(-1)                          # (B, N, H, 1)
        er = (feat * self.attn_r).sum(dim=-1).unsqueeze(-1)                          # (B, N, H, 1)
        e = F.leaky_relu(el.index_select(1, src) + er.index_select(1, dst), 0.2)    # (B, E, H, 1)
        a = edge_softmax(e, dst, h.size(1))                                          # (B, E, H, 1)
        m = feat.index_select(1, src) * a                                            # (B, E, H, F)
        rst = torch.zeros_like(feat).index_add(1, dst, m)                            # (B, N, H, F)
        return rst + self.bias.view(1, self.num_heads, self.out_feats)               # (B, N, H, F) [dgl-rst]


class GAT(nn.Module):
    def __init__(self, in_size, hid_size, heads, bug=""):
        super().__init__()
        self.bug = bug
        hidden = hid_size if bug == "hidden-heads-meaned" else hid_size * heads
        self.layer1 = GATConv(in_size, hid_size, heads)
        self.layer2 = GATConv(hidden, hid_size, heads)

    def forward(self, h, edge_index):                                                # (B, N, D), (2, E)
        h = F.elu(self.layer1(h, edge_index))                                        # (B, N, H, F)
        if self.bug == "hidden-heads-meaned":
            h = h.mean(2)                                                            # (B, N, F) [bug-meaned]
        else:
            h = h.flatten(2)                                                         # (B, N, H*F) [dgl-flatten]
        h = self.layer2(h, edge_index)                                               # (B, N, H, F)
        if self.bug == "mean-over-nodes":
            return h.mean(1)                                                         # (B, H, F) [bug-nodes]
        return h.mean(2)                                                             # (B, N, F) [dgl-mean]


BUGS = ("hidden-heads-meaned", "mean-over-nodes")
TWINS = ()
DIMS = ("B=2 T=7 D=16 H=4",)


def build(bug="", B=2, T=7, D=16, H=4):
    torch.manual_seed(0)
    edges = torch.randint(0, T, (2, 3 * T))
    loops = torch.arange(T).expand(2, T)
    edge_index = torch.cat([edges, loops], dim=1)                                     # (2, E)
    return GAT(D, D // H, H, bug=bug).eval(), (torch.randn(B, T, D), edge_index)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
