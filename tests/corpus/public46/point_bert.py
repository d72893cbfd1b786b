"""Julie-tang00/Point-BERT, models/Point_BERT.py (``PointTransformer``: ``reduce_dim``, ``cls_token``/``cls_pos``,
``pos_embed`` of the centers, the blocks fed ``x + pos``, ``cat([x[:, 0], x[:, 1:].max(1)[0]])``) and
models/dvae.py (``Group``: FPS centers, ``knn_point`` by ``topk`` of ``square_distance``, ``idx_base =
arange(B).view(-1, 1, 1) * num_points`` added to the neighbour ids, ``xyz.view(B * num_points, -1)[idx, :]``
``view(B, G, M, 3)`` less the centers; ``Encoder``: a mini-PointNet over ``point_groups.reshape(bs * g, n,
3).transpose(2, 1)``, ``max`` over the points, the global feature ``expand``\\ ed and ``cat``\\ ed, a second max),
commit 980c1e8; the blocks are timm's ``Block``/``Attention`` (``qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0,
3, 1, 4)``). ``misc.fps`` calls pointnet2_ops' CUDA furthest-point sampling; here it is the plain-torch
``farthest_point_sample`` of yanx27/Pointnet_Pointnet2_pytorch (models/pointnet2_utils.py) with ``index_points``.
Tokens are the T = G groups, each of M neighbours.

Bugs: ``idx-base-missing``: the neighbour ids gathered from ``xyz.view(B * num_points, -1)`` without
``idx_base``: every cloud's patches are cut from the first cloud's points; ``encoder-reshape-not-transpose``:
``point_groups.reshape(bs * g, 3, n)`` for ``.transpose(2, 1)`` (the ``(BG, 3, n)`` Conv1d layout by a reshape):
the mini-PointNet's channels are coordinates of different points."""

import sys

import torch
from torch import nn


def farthest_point_sample(xyz, npoint):                                  # (B, P, 3)
    B, P, _ = xyz.shape
    centroids = torch.zeros(B, npoint, dtype=torch.long)                 # (B, G)
    distance = torch.full((B, P), 1e10)                                  # (B, P)
    farthest = torch.zeros(B, dtype=torch.long)                          # (B,)
    batch_indices = torch.arange(B)                                      # (B,)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch_indices, farthest, :].view(B, 1, 3)         # (B, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)                      # (B, P)
        distance = torch.minimum(distance, dist)
        farthest = torch.max(distance, -1)[1]                            # (B,)
    return centroids


def index_points(points, idx):                                           # (B, P, 3), (B, G)
    batch_indices = torch.arange(points.shape[0]).view(-1, 1).expand_as(idx)   # (B, G)
    return points[batch_indices, idx, :]                                 # (B, G, 3)


def square_distance(src, dst):                                           # (B, G, 3), (B, P, 3)
    B, N, _ = src.shape
    _, M, _ = dst.shape
    dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))                  # (B, G, P)
    dist += torch.sum(src ** 2, -1).view(B, N, 1)                        # (B, G, 1)
    dist += torch.sum(dst ** 2, -1).view(B, 1, M)                        # (B, 1, P)
    return dist


def knn_point(nsample, xyz, new_xyz):
    sqrdists = square_distance(new_xyz, xyz)                             # (B, G, P)
    _, group_idx = torch.topk(sqrdists, nsample, dim=-1, largest=False, sorted=False)   # (B, G, M)
    return group_idx


class Group(nn.Module):
    def __init__(self, num_group, group_size, bug=""):
        super().__init__()
        self.num_group, self.group_size, self.bug = num_group, group_size, bug

    def forward(self, xyz):                                              # (B, P, 3)
        batch_size, num_points, _ = xyz.shape
        center = index_points(xyz, farthest_point_sample(xyz, self.num_group))   # (B, G, 3)
        idx = knn_point(self.group_size, xyz, center)                    # (B, G, M)
        if self.bug != "idx-base-missing":
            idx_base = torch.arange(0, batch_size).view(-1, 1, 1) * num_points   # (B, 1, 1)
            idx = idx + idx_base                                         # (B, G, M)
        idx = idx.view(-1)                                               # (B*G*M,)
        neighborhood = xyz.view(batch_size * num_points, -1)[idx, :]     # (B*G*M, 3)
        neighborhood = neighborhood.view(batch_size, self.num_group, self.group_size, 3).contiguous()   # (B, G, M, 3)
        neighborhood = neighborhood - center.unsqueeze(2)                # (B, G, M, 3)
        return neighborhood, center


class Encoder(nn.Module):
    def __init__(self, encoder_channel, bug=""):
        super().__init__()
        self.bug = bug
        self.encoder_channel = encoder_channel
        self.first_conv = nn.Sequential(nn.Conv1d(3, 32, 1), nn.BatchNorm1d(32), nn.ReLU(inplace=True),
                                        nn.Conv1d(32, 64, 1))
        self.second_conv = nn.Sequential(nn.Conv1d(128, 128, 1), nn.BatchNorm1d(128), nn.ReLU(inplace=True),
                                         nn.Conv1d(128, encoder_channel, 1))

    def forward(self, point_groups):                                     # (B, G, M, 3)
        bs, g, n, _ = point_groups.shape
        if self.bug == "encoder-reshape-not-transpose":
            point_groups = point_groups.reshape(bs * g, 3, n)            # (B*G, 3, M)
        else:
            point_groups = point_groups.reshape(bs * g, n, 3).transpose(2, 1)   # (B*G, 3, M)
        feature = self.first_conv(point_groups)                          # (B*G, 64, M)
        feature_global = torch.max(feature, dim=2, keepdim=True)[0]      # (B*G, 64, 1)
        feature = torch.cat([feature_global.expand(-1, -1, n), feature], dim=1)   # (B*G, 128, M)
        feature = self.second_conv(feature)                              # (B*G, C, M)
        feature_global = torch.max(feature, dim=2, keepdim=False)[0]     # (B*G, C)
        return feature_global.reshape(bs, g, self.encoder_channel)       # (B, G, C)


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):                                                # (B, 1+G, D)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)   # (B, N, 3, H, d_k)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                 # (3, B, H, N, d_k)
        q, k, v = qkv[0], qkv[1], qkv[2]                                 # (B, H, N, d_k)
        attn = (q @ k.transpose(-2, -1)) * self.scale                    # (B, H, N, N)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)                  # (B, N, D)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PointTransformer(nn.Module):
    def __init__(self, trans_dim, num_heads, num_group, group_size, encoder_dims=48, depth=2, cls_dim=10, bug=""):
        super().__init__()
        self.group_divider = Group(num_group, group_size, bug)
        self.encoder = Encoder(encoder_dims, bug)
        self.reduce_dim = nn.Linear(encoder_dims, trans_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, trans_dim))
        self.cls_pos = nn.Parameter(torch.randn(1, 1, trans_dim))
        self.pos_embed = nn.Sequential(nn.Linear(3, 64), nn.GELU(), nn.Linear(64, trans_dim))
        self.blocks = nn.ModuleList([Block(trans_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(trans_dim)
        self.cls_head_finetune = nn.Sequential(nn.Linear(trans_dim * 2, 64), nn.ReLU(inplace=True),
                                               nn.Linear(64, cls_dim))

    def forward(self, pts):                                              # (B, P, 3)
        neighborhood, center = self.group_divider(pts)                   # (B, G, M, 3), (B, G, 3)
        group_input_tokens = self.encoder(neighborhood)                  # (B, G, C)
        group_input_tokens = self.reduce_dim(group_input_tokens)         # (B, G, D)
        cls_tokens = self.cls_token.expand(group_input_tokens.size(0), -1, -1)   # (B, 1, D)
        cls_pos = self.cls_pos.expand(group_input_tokens.size(0), -1, -1)        # (B, 1, D)
        pos = self.pos_embed(center)                                     # (B, G, D)
        x = torch.cat((cls_tokens, group_input_tokens), dim=1)           # (B, 1+G, D)
        pos = torch.cat((cls_pos, pos), dim=1)                           # (B, 1+G, D)
        for block in self.blocks:
            x = block(x + pos)
        x = self.norm(x)
        concat_f = torch.cat([x[:, 0], x[:, 1:].max(1)[0]], dim=-1)      # (B, 2*D)
        return self.cls_head_finetune(concat_f)


BUGS = ("idx-base-missing", "encoder-reshape-not-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = PointTransformer(trans_dim=D, num_heads=H, num_group=T, group_size=5, bug=bug).eval()
    return model, (torch.randn(B, 8 * T, 3),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
