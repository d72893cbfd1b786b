"""zju3dv/LoFTR, src/loftr/loftr_module/linear_attention.py (``elu_feature_map``, ``LinearAttention``) and
src/loftr/loftr_module/transformer.py (``LoFTREncoderLayer``, ``LocalFeatureTransformer``): the coarse-level
transformer that interleaves self and cross attention between the flattened feature maps of two images
(``feat0 [N, L, C]``, ``feat1 [N, S, C]``, with the padding masks ``mask0 [N, L]``, ``mask1 [N, S]`` of images
padded to a common size). Heads ``view(bs, -1, self.nhead, self.dim)`` (``[N, L, H, D]``); linear attention with
``elu(x) + 1``: ``Q = Q * q_mask[:, :, None, None]``, ``K`` and ``values`` times ``kv_mask[:, :, None, None]``,
``values / v_length``, ``KV = einsum("nshd,nshv->nhdv", K, values)``, ``Z = 1 / (einsum("nlhd,nhd->nlh", Q,
K.sum(dim=1)) + eps)``, ``einsum("nlhd,nhdv,nlh->nlhv", Q, KV, Z) * v_length``; the merge ``view(bs, -1,
self.nhead*self.dim)``, ``norm1``, ``mlp(cat([x, message], dim=2))``, ``norm2``, ``x + message``; a ``'cross'``
layer updates ``feat0`` from ``feat1``, then ``feat1`` from the updated ``feat0`` (LoFTR's order).

Bugs: ``k-unmasked``: only ``values`` multiplied by ``kv_mask`` (the padded keys' features still enter the
normaliser ``K.sum(dim=1)``, so every query's weights over the real keys sum to less than one);
``kv-einsum-transposed``: ``KV = einsum("nshd,nshv->nhvd", K, values)`` (the ``D x D`` summary stored transposed
and read back as ``nhdv``: each output channel ``v`` collects value channel ``d`` weighted by key channel ``v``)."""

import sys

import torch
from torch import nn


def elu_feature_map(x):
    return torch.nn.functional.elu(x) + 1


class LinearAttention(nn.Module):
    def __init__(self, eps=1e-6, bug=""):
        super().__init__()
        self.feature_map = elu_feature_map
        self.eps, self.bug = eps, bug

    def forward(self, queries, keys, values, q_mask=None, kv_mask=None):
        Q = self.feature_map(queries)                                                # (N, L, H, D)
        K = self.feature_map(keys)                                                   # (N, S, H, D)

        # set padded position to zero
        if q_mask is not None:
            Q = Q * q_mask[:, :, None, None]
        if kv_mask is not None:
            if self.bug != "k-unmasked":
                K = K * kv_mask[:, :, None, None]
            values = values * kv_mask[:, :, None, None]

        v_length = values.size(1)
        values = values / v_length  # prevent fp16 overflow
        if self.bug == "kv-einsum-transposed":
            KV = torch.einsum("nshd,nshv->nhvd", K, values)                          # (N, H, V, D)
        else:
            KV = torch.einsum("nshd,nshv->nhdv", K, values)                          # (N, H, D, V)
        Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + self.eps)          # (N, L, H)
        queried_values = torch.einsum("nlhd,nhdv,nlh->nlhv", Q, KV, Z) * v_length    # (N, L, H, V)
        return queried_values.contiguous()


class LoFTREncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.dim = d_model // nhead
        self.nhead = nhead
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.attention = LinearAttention(bug=bug)
        self.merge = nn.Linear(d_model, d_model, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(d_model * 2, d_model * 2, bias=False),
            nn.ReLU(True),
            nn.Linear(d_model * 2, d_model, bias=False),
        )
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, source, x_mask=None, source_mask=None):
        bs = x.size(0)
        query, key, value = x, source, source
        query = self.q_proj(query).view(bs, -1, self.nhead, self.dim)                # (N, L, H, D)
        key = self.k_proj(key).view(bs, -1, self.nhead, self.dim)                    # (N, S, H, D)
        value = self.v_proj(value).view(bs, -1, self.nhead, self.dim)                # (N, S, H, D)
        message = self.attention(query, key, value, q_mask=x_mask, kv_mask=source_mask)   # (N, L, H, D)
        message = self.merge(message.view(bs, -1, self.nhead * self.dim))           # (N, L, C)
        message = self.norm1(message)
        message = self.mlp(torch.cat([x, message], dim=2))                           # (N, L, C)
        message = self.norm2(message)
        return x + message


class LocalFeatureTransformer(nn.Module):
    def __init__(self, d_model, nhead, layer_names, bug=""):
        super().__init__()
        self.layer_names = layer_names
        self.layers = nn.ModuleList([LoFTREncoderLayer(d_model, nhead, bug) for _ in layer_names])

    def forward(self, feat0, feat1, mask0=None, mask1=None):
        for layer, name in zip(self.layers, self.layer_names):
            if name == 'self':
                feat0 = layer(feat0, feat0, mask0, mask0)
                feat1 = layer(feat1, feat1, mask1, mask1)
            elif name == 'cross':
                feat0 = layer(feat0, feat1, mask0, mask1)
                feat1 = layer(feat1, feat0, mask1, mask0)
        return feat0, feat1


BUGS = ("k-unmasked", "kv-einsum-transposed")
TWINS = ()
DIMS = ("B=2 T=6 S=8 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=6, S=8, D=32, H=4):  # noqa: N803
    """Flattened coarse features of two images (``T`` and ``S`` cells); the later pairs padded: 2 cells masked."""
    torch.manual_seed(0)
    model = LocalFeatureTransformer(D, H, ['self', 'cross'], bug)
    mask0 = torch.ones(B, T, dtype=torch.bool)
    mask1 = torch.ones(B, S, dtype=torch.bool)
    mask0[1:, -2:] = False
    mask1[1:, -2:] = False
    return model.eval(), (torch.randn(B, T, D), torch.randn(B, S, D), mask0, mask1)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
