"""dmlc/dgl issue #3267 ("Bug of dgl.nn.DotGatConv"; yzh119: "Yes you are right, would you mind creating a PR to
fix that?"; fixed by pull request #3272, "[bugfix] fix the bug of DotGatConv when compute the edge_softmax"):
python/dgl/nn/pytorch/conv/dotgatconv.py ``DotGatConv.forward`` divided the attention *after* the softmax (the
reporter: "the position of ``/(self._out_feats**0.5)`` seems to be wrong"), where the scaled dot product divides
the scores before it: ``edge_softmax(graph, graph.edata['a'] / (self._out_feats**0.5))``. Each
node's weights then sum to ``1 / sqrt(out_feats)`` and their sharpness is the unscaled one.

The idiom (DGL's ``DotGatConv`` with ``num_heads``, its message passing written in plain torch on an edge list
``(2, E)`` with self-loops, as DGL's kernels compute it): ``fc`` Linear(in, H * C, no bias) ``view(-1, H, C)``;
``fn.u_dot_v('ft', 'ft', 'a')`` (per edge the source's and the destination's features dotted, ``(E, H, 1)``);
``edge_softmax`` (normalized over the edges that share a destination: a max and a sum scattered onto the
destinations, read back per edge); ``fn.u_mul_e('ft', 'sa', 'attn')`` and ``fn.sum`` into the destinations ``(N,
H, C)``; then, as a node classifier stacks it, the heads ``flatten(1)``\\ ed and a linear head.

Bugs (argument): ``scale-after-softmax``: the division after ``edge_softmax`` (the code of #3267);
``softmax-by-source``: ``edge_softmax(..., norm_by='src')``, each source's out-edges normalized instead of each
destination's in-edges (the slip pyg-team/pytorch_geometric issue #224 reported in ``GATConv``, ``softmax(alpha,
edge_index[0])``, "Good catch! The softmax must be computed based on the message flow")."""

import sys

import torch
from torch import nn

BUGS = ("scale-after-softmax", "softmax-by-source")
TWINS = ()
DIMS = ("T=7 D=32 H=4",)
EQUAL = {DIMS[0]: "T=4 D=32 H=4"}


def edge_softmax(edge_index, logits, num_nodes, norm_by="dst"):                  # (2, E), (E, H, 1)
    """dgl.ops.edge_softmax: a softmax over the edges that share a destination (or a source)."""
    index = edge_index[1] if norm_by == "dst" else edge_index[0]                    # (E,)
    shape = (num_nodes,) + logits.shape[1:]
    score_max = torch.full(shape, float("-inf")).index_reduce(0, index, logits, "amax")   # (N, H, 1)
    score = (logits - score_max.index_select(0, index)).exp()                      # (E, H, 1)
    score_sum = torch.zeros(shape).index_add(0, index, score)                      # (N, H, 1)
    return score / score_sum.index_select(0, index)                                # (E, H, 1)


class DotGatConv(nn.Module):
    def __init__(self, in_feats, out_feats, num_heads, bug=""):
        super().__init__()
        self._out_feats, self._num_heads, self.bug = out_feats, num_heads, bug
        self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)

    def forward(self, edge_index, feat):                                            # (2, E), (N, F)
        num_nodes = feat.size(0)
        feat_src = feat_dst = self.fc(feat).view(-1, self._num_heads, self._out_feats)   # (N, H, C)
        src, dst = edge_index[0], edge_index[1]                                     # (E,), (E,)
        # Step 1. dot product
        a = (feat_src.index_select(0, src) * feat_dst.index_select(0, dst)).sum(-1, keepdim=True)   # (E, H, 1)
        # Step 2. edge softmax to compute attention scores
        if self.bug == "scale-after-softmax":
            sa = edge_softmax(edge_index, a, num_nodes) / (self._out_feats ** 0.5)
        elif self.bug == "softmax-by-source":
            sa = edge_softmax(edge_index, a / (self._out_feats ** 0.5), num_nodes, norm_by="src")
        else:
            sa = edge_softmax(edge_index, a / (self._out_feats ** 0.5), num_nodes)
        # Step 3. broadcast the scores to each edge and aggregate on the destinations
        attn = feat_src.index_select(0, src) * sa                                   # (E, H, C)
        return torch.zeros_like(feat_dst).index_add(0, dst, attn)                   # (N, H, C)


class NodeClassifier(nn.Module):
    def __init__(self, in_feats, num_heads, n_classes=5, bug=""):
        super().__init__()
        self.conv = DotGatConv(in_feats, in_feats // num_heads, num_heads, bug)
        self.head = nn.Linear(in_feats, n_classes)

    def forward(self, edge_index, feat):
        h = self.conv(edge_index, feat).flatten(1)                                  # (N, H*C)
        return self.head(torch.relu(h))


def build(bug="", T=7, D=32, H=4):
    torch.manual_seed(0)
    edges = torch.randint(0, T, (2, 3 * T))
    loops = torch.arange(T).expand(2, T)
    edge_index = torch.cat([edges, loops], dim=1)                                   # (2, E)
    return NodeClassifier(D, H, bug=bug).eval(), (edge_index, torch.randn(T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
