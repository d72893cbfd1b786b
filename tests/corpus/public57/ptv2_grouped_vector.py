"""Pointcept/Pointcept, pointcept/models/point_transformer_v2/point_transformer_v2m2_base.py
(``GroupedVectorAttention``, ``PointBatchNorm``, v1.5) with the pure-torch semantics of ``pointops.knn_query`` and
``pointops.grouping``: Point Transformer V2's grouped vector attention over a batch of clouds packed point by point,
``feat [N, C]``, ``coord [N, 3]``, ``offset`` (the cumulative point counts); ``reference_index [N, K]`` holds each
point's ``K`` nearest neighbours in its own cloud (``-1`` where the cloud has fewer than ``K`` points);
``grouping`` appends a zero row and gathers ``feat[idx.view(-1)].view(N, K, C)`` (``-1`` reads the zero row),
the keys with their relative coordinates; ``relation_qk = key - query.unsqueeze(1)`` plus the positional bias
``linear_p_bias(pos)``; ``weight_encoding`` maps each relation to ``groups`` weights, ``nn.Softmax(dim=1)`` over the
neighbours, the padded neighbours zeroed after it (``einsum("n s g, n s -> n s g", weight, sign(reference_index +
1))``), values split ``"n ns (g i) -> n ns g i"`` and ``einsum("n s g i, n s g -> n g i")``.

Bugs: ``softmax-over-groups``: ``nn.Softmax(dim=-1)`` (over the ``g`` groups of one neighbour, the softmax module
built with the usual last axis); ``knn-index-not-offset``: the neighbours of each cloud found by ``cdist``/``topk``
within it but not shifted by the cloud's start (``offset``): every cloud after the first gathers its keys and
values from the first cloud's points."""

import sys

import einops
import torch
from torch import nn


class PointBatchNorm(nn.Module):
    def __init__(self, embed_channels):
        super().__init__()
        self.norm = nn.BatchNorm1d(embed_channels)

    def forward(self, input):
        if input.dim() == 3:
            return self.norm(input.transpose(1, 2).contiguous()).transpose(1, 2).contiguous()   # (N, K, C)
        return self.norm(input)                                                      # (N, C)


def knn_query(k, coord, offset, bug=""):
    reference_index, start = [], 0
    for end in offset.tolist():
        dist = torch.cdist(coord[start:end], coord[start:end])                       # (n_b, n_b)
        idx = dist.topk(min(k, end - start), dim=-1, largest=False).indices          # (n_b, min(K, n_b))
        if bug != "knn-index-not-offset":
            idx = idx + start
        pad = idx.new_full((end - start, k - idx.shape[1]), -1)                     # (n_b, K - n_b)
        reference_index.append(torch.cat([idx, pad], dim=1))                        # (n_b, K)
        start = end
    return torch.cat(reference_index, dim=0)                                         # (N, K)


def grouping(idx, feat, xyz, with_xyz=False):
    m, nsample, c = idx.shape[0], idx.shape[1], feat.shape[1]
    xyz = torch.cat([xyz, torch.zeros([1, 3])], dim=0)                               # (N + 1, 3)
    feat = torch.cat([feat, torch.zeros([1, c])], dim=0)                             # (N + 1, C)
    grouped_feat = feat[idx.view(-1).long(), :].view(m, nsample, c)                  # (N, K, C)
    if with_xyz:
        grouped_xyz = xyz[idx.view(-1).long(), :].view(m, nsample, 3) - xyz[:m].unsqueeze(1)   # (N, K, 3)
        return torch.cat((grouped_xyz, grouped_feat), -1)                            # (N, K, 3 + C)
    return grouped_feat


class GroupedVectorAttention(nn.Module):
    def __init__(self, embed_channels, groups, bug=""):
        super().__init__()
        self.embed_channels, self.groups = embed_channels, groups
        self.linear_q = nn.Sequential(nn.Linear(embed_channels, embed_channels), PointBatchNorm(embed_channels),
                                      nn.ReLU(inplace=True))
        self.linear_k = nn.Sequential(nn.Linear(embed_channels, embed_channels), PointBatchNorm(embed_channels),
                                      nn.ReLU(inplace=True))
        self.linear_v = nn.Linear(embed_channels, embed_channels)
        self.linear_p_bias = nn.Sequential(nn.Linear(3, embed_channels), PointBatchNorm(embed_channels),
                                           nn.ReLU(inplace=True), nn.Linear(embed_channels, embed_channels))
        self.weight_encoding = nn.Sequential(nn.Linear(embed_channels, groups), PointBatchNorm(groups),
                                             nn.ReLU(inplace=True), nn.Linear(groups, groups))
        self.softmax = nn.Softmax(dim=-1 if bug == "softmax-over-groups" else 1)

    def forward(self, feat, coord, reference_index):
        query, key, value = self.linear_q(feat), self.linear_k(feat), self.linear_v(feat)   # (N, C)
        key = grouping(reference_index, key, coord, with_xyz=True)                  # (N, K, 3 + C)
        value = grouping(reference_index, value, coord, with_xyz=False)             # (N, K, C)
        pos, key = key[:, :, 0:3], key[:, :, 3:]                                     # (N, K, 3), (N, K, C)
        relation_qk = key - query.unsqueeze(1)                                       # (N, K, C)
        peb = self.linear_p_bias(pos)
        relation_qk = relation_qk + peb
        value = value + peb
        weight = self.weight_encoding(relation_qk)                                   # (N, K, g)
        weight = self.softmax(weight)
        mask = torch.sign(reference_index + 1)                                       # (N, K)
        weight = torch.einsum("n s g, n s -> n s g", weight, mask)
        value = einops.rearrange(value, "n ns (g i) -> n ns g i", g=self.groups)     # (N, K, g, C/g)
        feat = torch.einsum("n s g i, n s g -> n g i", value, weight)                # (N, g, C/g)
        return einops.rearrange(feat, "n g i -> n (g i)")                            # (N, C)


class Block(nn.Module):
    def __init__(self, embed_channels, groups, neighbours, bug=""):
        super().__init__()
        self.neighbours, self.bug = neighbours, bug
        self.attn = GroupedVectorAttention(embed_channels, groups, bug)
        self.norm1 = PointBatchNorm(embed_channels)

    def forward(self, coord, feat, offset):
        reference_index = knn_query(self.neighbours, coord, offset, self.bug)        # (N, K)
        return feat + self.norm1(self.attn(feat, coord, reference_index))            # (N, C)


BUGS = ("softmax-over-groups", "knn-index-not-offset")
TWINS = ()
DIMS = ("B=2 T=7 K=5 D=32 H=4", "N=11 K=5 D=32 H=4")   # (the clouds' sizes, the packed points' count)
EQUAL = {DIMS[0]: "B=4 T=4 K=3 D=32 H=4", DIMS[1]: "N=11 K=4 D=32 H=4"}


def build(bug="", B=2, T=7, K=5, D=32, H=4):  # noqa: N803
    """``B`` clouds packed: the first of ``T`` points, the others of ``T - 3`` (fewer than ``K``: padded
    neighbours); ``H`` is the number of groups. ``N`` (the second reading) is the packed count, ``T + (B - 1)(T - 3)``
    at the default ``B`` and ``T``."""
    torch.manual_seed(0)
    counts = torch.tensor([T] + [T - 3] * (B - 1))
    offset = counts.cumsum(0)
    n = int(offset[-1])
    return Block(D, H, K, bug).eval(), (torch.randn(n, 3), torch.randn(n, D), offset)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
