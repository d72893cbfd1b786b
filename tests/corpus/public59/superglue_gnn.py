"""magicleap/SuperGluePretrainedNetwork, models/superglue.py (``attention``, ``MultiHeadedAttention``,
``AttentionalPropagation``, ``AttentionalGNN``, ``MLP``): the attentional graph network that alternates self and
cross attention between the keypoint descriptors of two images (``desc0 [B, D, N0]``, ``desc1 [B, D, N1]``,
channels first, ``Conv1d`` projections). The heads are split dim-major: ``l(x).view(batch_dim, self.dim,
self.num_heads, -1)`` (``[B, d_k, H, N]``, channel ``c = i·H + h``); ``scores = einsum('bdhn,bdhm->bhnm', query,
key) / dim**.5`` with ``dim = query.shape[1]``; ``softmax(scores, dim=-1)``; ``einsum('bhnm,bdhm->bdhn', prob,
value)``; the merge ``view(batch_dim, self.dim*self.num_heads, -1)`` and a 1 x 1 ``Conv1d``;
``AttentionalPropagation``: ``mlp(cat([x, message], dim=1))``; ``AttentionalGNN``: for a ``'cross'`` layer ``src0,
src1 = desc1, desc0``, both deltas from the old descriptors, then ``desc0 + delta0``, ``desc1 + delta1``.

Bugs: ``cross-src-not-swapped``: the ``'cross'`` layer given ``src0, src1 = desc0, desc1`` (a second self layer:
the two images never meet); ``softmax-over-queries``: ``softmax(scores, dim=-2)`` (over the query keypoints ``n``);
``split-heads-major``: ``view(batch_dim, self.num_heads, self.dim, -1)`` under the same einsum letters (a port that
writes the usual heads-first split: the einsum's ``d`` now runs over the 4 heads and its ``h`` over the 8 channels,
so each "head" is a width-4 slice strided across the heads, 8 of them, scaled by ``1/sqrt(4)``)."""

import sys
from copy import deepcopy

import torch
from torch import nn


def MLP(channels, do_bn=True):  # noqa: N802
    n = len(channels)
    layers = []
    for i in range(1, n):
        layers.append(nn.Conv1d(channels[i - 1], channels[i], kernel_size=1, bias=True))
        if i < (n - 1):
            if do_bn:
                layers.append(nn.BatchNorm1d(channels[i]))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def attention(query, key, value, bug=""):
    dim = query.shape[1]
    scores = torch.einsum('bdhn,bdhm->bhnm', query, key) / dim ** .5                 # (B, H, N0, N1)
    prob = torch.nn.functional.softmax(scores, dim=-2 if bug == "softmax-over-queries" else -1)
    return torch.einsum('bhnm,bdhm->bdhn', prob, value), prob                       # (B, d_k, H, N0)


class MultiHeadedAttention(nn.Module):
    def __init__(self, num_heads, d_model, bug=""):
        super().__init__()
        assert d_model % num_heads == 0
        self.dim = d_model // num_heads
        self.num_heads, self.bug = num_heads, bug
        self.merge = nn.Conv1d(d_model, d_model, kernel_size=1)
        self.proj = nn.ModuleList([deepcopy(self.merge) for _ in range(3)])

    def forward(self, query, key, value):
        batch_dim = query.size(0)
        if self.bug == "split-heads-major":
            query, key, value = [l(x).view(batch_dim, self.num_heads, self.dim, -1)   # (B, H, d_k, N)
                                 for l, x in zip(self.proj, (query, key, value))]  # noqa: E741
        else:
            query, key, value = [l(x).view(batch_dim, self.dim, self.num_heads, -1)   # (B, d_k, H, N)
                                 for l, x in zip(self.proj, (query, key, value))]  # noqa: E741
        x, _ = attention(query, key, value, self.bug)
        return self.merge(x.contiguous().view(batch_dim, self.dim * self.num_heads, -1))   # (B, D, N0)


class AttentionalPropagation(nn.Module):
    def __init__(self, feature_dim, num_heads, bug=""):
        super().__init__()
        self.attn = MultiHeadedAttention(num_heads, feature_dim, bug)
        self.mlp = MLP([feature_dim * 2, feature_dim * 2, feature_dim])
        nn.init.constant_(self.mlp[-1].bias, 0.0)

    def forward(self, x, source):
        message = self.attn(x, source, source)
        return self.mlp(torch.cat([x, message], dim=1))                              # (B, D, N)


class AttentionalGNN(nn.Module):
    def __init__(self, feature_dim, layer_names, num_heads=4, bug=""):
        super().__init__()
        self.layers = nn.ModuleList([AttentionalPropagation(feature_dim, num_heads, bug) for _ in layer_names])
        self.names, self.bug = layer_names, bug

    def forward(self, desc0, desc1):
        for layer, name in zip(self.layers, self.names):
            if name == 'cross' and self.bug != "cross-src-not-swapped":
                src0, src1 = desc1, desc0
            else:  # if name == 'self':
                src0, src1 = desc0, desc1
            delta0, delta1 = layer(desc0, src0), layer(desc1, src1)
            desc0, desc1 = (desc0 + delta0), (desc1 + delta1)
        return desc0, desc1


BUGS = ("cross-src-not-swapped", "softmax-over-queries", "split-heads-major")
TWINS = ()
DIMS = ("B=2 T=5 S=7 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=5, S=7, D=32, H=4):  # noqa: N803
    """Keypoint descriptors of two images (``T`` and ``S`` keypoints), channels first, after the keypoint encoder."""
    torch.manual_seed(0)
    model = AttentionalGNN(D, ['self', 'cross'], H, bug)
    return model.eval(), (torch.randn(B, D, T), torch.randn(B, D, S))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
