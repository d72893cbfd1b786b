"""lucidrains/point-transformer-pytorch, ``point_transformer_pytorch/point_transformer_pytorch.py``
(``PointTransformerLayer``, v0.1.5; the layer of Zhao et al.'s Point Transformer): vector attention over each
point's ``num_neighbors`` nearest neighbours: ``to_qkv(x).chunk(3, dim=-1)``; ``rel_pos = pos[:, :, None, :] -
pos[:, None, :, :]`` through ``pos_mlp``; ``qk_rel = q[:, :, None, :] - k[:, None, :, :]``; ``v`` repeated over
the queries (``repeat(v, 'b j d -> b i j d')``); the neighbours ``rel_pos.norm(dim=-1).topk(k, largest=False)``,
then every ``(b, i, j, d)`` tensor gathered along ``j`` by ``batched_index_select`` (``gather`` of the indices
expanded over the features); ``v + rel_pos_emb``; ``attn_mlp(qk_rel + rel_pos_emb)``; ``softmax(dim=-2)`` over
the neighbours; ``einsum('b i j d, b i j d -> b i d')``.

Bugs: ``softmax-over-queries``: ``sim.softmax(dim=1)`` (over the points ``i`` instead of their neighbours ``j``,
the slip of counting the dim from the front); ``neighbours-farthest``: ``topk(k)`` without ``largest=False``
(the k farthest points taken as the neighbourhood: ``topk``'s default, the natural slip)."""

import sys

import torch
from einops import repeat
from torch import einsum, nn


def batched_index_select(values, indices, dim=1):
    value_dims = values.shape[(dim + 1):]
    values_shape, indices_shape = map(lambda t: list(t.shape), (values, indices))
    indices = indices[(..., *((None,) * len(value_dims)))]
    indices = indices.expand(*((-1,) * len(indices_shape)), *value_dims)
    value_expand_len = len(indices_shape) - (dim + 1)
    values = values[(*((slice(None),) * dim), *((None,) * value_expand_len), ...)]
    value_expand_shape = [-1] * len(values.shape)
    expand_slice = slice(dim, (dim + value_expand_len))
    value_expand_shape[expand_slice] = indices.shape[expand_slice]
    values = values.expand(*value_expand_shape)
    dim += value_expand_len
    return values.gather(dim, indices)


class PointTransformerLayer(nn.Module):
    def __init__(self, dim, pos_mlp_hidden_dim=16, attn_mlp_hidden_mult=2, num_neighbors=3, bug=""):
        super().__init__()
        self.num_neighbors, self.bug = num_neighbors, bug
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.pos_mlp = nn.Sequential(nn.Linear(3, pos_mlp_hidden_dim), nn.ReLU(),
                                     nn.Linear(pos_mlp_hidden_dim, dim))
        self.attn_mlp = nn.Sequential(nn.Linear(dim, dim * attn_mlp_hidden_mult), nn.ReLU(),
                                      nn.Linear(dim * attn_mlp_hidden_mult, dim))

    def forward(self, x, pos):
        n, num_neighbors = x.shape[1], self.num_neighbors
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)                                         # (B, N, D)
        rel_pos = pos[:, :, None, :] - pos[:, None, :, :]                                 # (B, N, N, 3)
        rel_pos_emb = self.pos_mlp(rel_pos)                                               # (B, N, N, D)
        qk_rel = q[:, :, None, :] - k[:, None, :, :]                                      # (B, N, N, D)
        v = repeat(v, "b j d -> b i j d", i=n)
        rel_dist = rel_pos.norm(dim=-1)                                                   # (B, N, N)
        if self.bug == "neighbours-farthest":
            dist, indices = rel_dist.topk(num_neighbors)
        else:
            dist, indices = rel_dist.topk(num_neighbors, largest=False)                   # (B, N, k)
        v = batched_index_select(v, indices, dim=2)                                       # (B, N, k, D)
        qk_rel = batched_index_select(qk_rel, indices, dim=2)
        rel_pos_emb = batched_index_select(rel_pos_emb, indices, dim=2)
        v = v + rel_pos_emb
        sim = self.attn_mlp(qk_rel + rel_pos_emb)
        attn = sim.softmax(dim=1 if self.bug == "softmax-over-queries" else -2)
        return einsum("b i j d, b i j d -> b i d", attn, v)                               # (B, N, D)


BUGS = ("softmax-over-queries", "neighbours-farthest")
TWINS = ()
#: T: the points
DIMS = ("B=2 T=6 D=32",)


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return PointTransformerLayer(D, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, T, 3))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
