"""pyg-team/pytorch_geometric, torch_geometric/nn/conv/transformer_conv.py (``TransformerConv``, ``concat=True``,
``beta=True``, ``root_weight=True``; PyG 2.3-2.5) with ``MessagePassing.propagate``'s gather and ``aggr="add"``,
``torch_geometric.utils.softmax`` and ``torch_geometric.utils.scatter`` written in plain torch on an edge list
``edge_index`` ``(2, E)`` (``flow="source_to_target"``: row 0 the sources ``j``, row 1 the targets ``i``; a
self-loop on every node): the graph transformer of Shi et al. (UniMP). ``query = lin_query(x).view(-1, H, C)``,
``key`` and ``value`` the same ``(N, H, C)``; ``message``: per edge ``query_i`` (gathered by the target) against
``key_j`` (by the source), ``alpha = (query_i * key_j).sum(dim=-1) / sqrt(C)`` ``(E, H)``, a softmax over the edges
that share a target (``scatter(..., reduce="max")``, ``exp``, ``scatter(..., reduce="sum")``, each read back with
``index_select``), ``value_j * alpha.view(-1, H, 1)``; the messages added into their targets ``(N, H, C)``, viewed
``(N, H * C)``, and the gated skip ``beta = sigmoid(lin_beta(cat([out, x_r, out - x_r])))``.

Bugs: ``softmax-by-source``: the softmax grouped by ``edge_index[0]`` (each source's outgoing edges sum to one, not
each target's incoming ones); ``query-from-source``: ``query_j``, the query gathered by the source row as the key is
(the ``_i``/``_j`` suffix slip: each edge scores its source against itself); ``aggregate-to-source``: the messages
scattered into ``edge_index[0]`` (what ``flow="target_to_source"`` does) while the softmax groups by target."""

import math
import sys

import torch
from torch import nn


def scatter(src, index, dim_size, reduce="sum"):                                 # (E, H, ...), (E,)
    """torch_geometric.utils.scatter along dim 0: ``index`` broadcast to ``src``'s shape."""
    index = index.view(-1, *([1] * (src.dim() - 1))).expand_as(src)              # (E, H, ...)
    size = (dim_size, *src.shape[1:])
    if reduce == "sum":
        return src.new_zeros(size).scatter_add_(0, index, src)                   # (N, H, ...)
    return src.new_zeros(size).scatter_reduce_(0, index, src, reduce="amax", include_self=False)   # (N, H, ...)


def softmax(src, index, num_nodes):                                              # (E, H), (E,)
    src_max = scatter(src.detach(), index, num_nodes, reduce="max")              # (N, H)
    out = (src - src_max.index_select(0, index)).exp()                           # (E, H)
    out_sum = scatter(out, index, num_nodes, reduce="sum") + 1e-16               # (N, H)
    return out / out_sum.index_select(0, index)                                  # (E, H)


class TransformerConv(nn.Module):
    def __init__(self, in_channels, out_channels, heads, bug=""):
        super().__init__()
        self.heads, self.out_channels, self.bug = heads, out_channels, bug
        self.lin_key = nn.Linear(in_channels, heads * out_channels)
        self.lin_query = nn.Linear(in_channels, heads * out_channels)
        self.lin_value = nn.Linear(in_channels, heads * out_channels)
        self.lin_skip = nn.Linear(in_channels, heads * out_channels)
        self.lin_beta = nn.Linear(3 * heads * out_channels, 1, bias=False)

    def message(self, query_i, key_j, value_j, index, size_i):
        alpha = (query_i * key_j).sum(dim=-1) / math.sqrt(self.out_channels)     # (E, H)
        alpha = softmax(alpha, index, size_i)                                    # (E, H)
        return value_j * alpha.view(-1, self.heads, 1)                           # (E, H, C)

    def propagate(self, edge_index, query, key, value):
        src, dst = edge_index[0], edge_index[1]                                  # (E,), (E,)
        query_i = query.index_select(0, src if self.bug == "query-from-source" else dst)   # (E, H, C)
        key_j = key.index_select(0, src)                                         # (E, H, C)
        value_j = value.index_select(0, src)                                     # (E, H, C)
        index = src if self.bug == "softmax-by-source" else dst
        msg = self.message(query_i, key_j, value_j, index, query.size(0))        # (E, H, C)
        target = src if self.bug == "aggregate-to-source" else dst
        return scatter(msg, target, query.size(0), reduce="sum")                 # (N, H, C)

    def forward(self, x, edge_index):                                            # (N, F), (2, E)
        H, C = self.heads, self.out_channels
        query = self.lin_query(x).view(-1, H, C)                                 # (N, H, C)
        key = self.lin_key(x).view(-1, H, C)                                     # (N, H, C)
        value = self.lin_value(x).view(-1, H, C)                                 # (N, H, C)
        out = self.propagate(edge_index, query=query, key=key, value=value)      # (N, H, C)
        out = out.view(-1, self.heads * self.out_channels)                       # (N, H * C)
        x_r = self.lin_skip(x)                                                   # (N, H * C)
        beta = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)).sigmoid()   # (N, 1)
        return beta * x_r + (1 - beta) * out                                     # (N, H * C)


BUGS = ("softmax-by-source", "query-from-source", "aggregate-to-source")
TWINS = ()
DIMS = ("T=7 D=32 H=4",)   # (T: the graph's nodes)
EQUAL = {DIMS[0]: "T=4 D=32 H=4"}


def build(bug="", T=7, D=32, H=4):  # noqa: N803
    """``T`` nodes with ``D`` features, ``3T`` random directed edges and a self-loop on each node."""
    torch.manual_seed(0)
    edges = torch.randint(0, T, (2, 3 * T))
    loops = torch.arange(T).expand(2, T)
    edge_index = torch.cat([edges, loops], dim=1)                                # (2, E)
    return TransformerConv(D, D // H, H, bug).eval(), (torch.randn(T, D), edge_index)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
