"""huggingface/pytorch-image-models, timm/models/maxxvit.py (``MaxxVitBlock`` with ``use_nchw_attn=False``,
``PartitionAttentionCl``, ``AttentionCl``, ``window_partition``/``window_reverse``, ``grid_partition``/
``grid_reverse``) and timm/layers/pos_embed_rel.py (``RelPosBias``, ``gen_relative_position_index``): MaxViT's
block and grid attention on a channels-last map. The block permutes ``NCHW -> NHWC``; block attention cuts
``view(B, H // p, p, W // p, p, C).permute(0, 1, 3, 2, 4, 5)`` (local ``p x p`` windows), grid attention cuts
``view(B, p, H // p, p, W // p, C).permute(0, 2, 4, 1, 3, 5)`` (a dilated ``p x p`` grid whose cells are ``H // p``
apart), each folded into the batch with ``view(-1, p, p, C)`` and put back by its own reverse
(``permute(0, 1, 3, 2, 4, 5)`` for windows, ``permute(0, 3, 1, 4, 2, 5)`` for the grid). ``AttentionCl`` with
``head_first=True`` (timm's default: ``qkv(x).view(B, -1, heads, dim_head * 3).transpose(1, 2).chunk(3, dim=3)``,
q, k and v interleaved per head, as the TF weights are), a relative position bias read from a table by the
``relative_position_index`` buffer (``view(bias_shape).permute(2, 0, 1)``), ``softmax(-1)``, ``transpose(1, 2)
.reshape(restore_shape + (-1,))``. Partition size 3 on a 15 x 21 map.

Bugs: ``grid-reverse-window-permute``: ``grid_reverse`` written with ``window_reverse``'s ``permute(0, 1, 3, 2, 4,
5)`` (a copy-paste of the pair above it: the grid cells are put back as if they were local windows, so every
token after the grid attention lands at another pixel); ``rel-bias-no-permute``: the gathered table ``(N * N,
heads)`` ``view``ed straight to ``(heads, N, N)`` without ``view(bias_shape).permute(2, 0, 1)`` (the bias of one
head spread over all heads and query rows); ``merge-no-transpose``: ``x.reshape(restore_shape + (-1,))`` without
``transpose(1, 2)`` (heads and window tokens mixed into the channels)."""

import sys

import torch
from torch import nn

PARTITION = 3


def window_partition(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size[0], window_size[0], W // window_size[1], window_size[1], C)  # (B, nh, p, nw, p, C)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size[0], window_size[1], C)  # (B·nh·nw, p, p, C)
    return windows


def window_reverse(windows, window_size, img_size):
    H, W = img_size
    C = windows.shape[-1]
    x = windows.view(-1, H // window_size[0], W // window_size[1],
                     window_size[0], window_size[1], C)                              # (B, nh, nw, p, p, C)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)                  # (B, H, W, C)
    return x


def grid_partition(x, grid_size):
    B, H, W, C = x.shape
    x = x.view(B, grid_size[0], H // grid_size[0], grid_size[1], W // grid_size[1], C)  # (B, p, nh, p, nw, C)
    windows = x.permute(0, 2, 4, 1, 3, 5).contiguous().view(-1, grid_size[0], grid_size[1], C)  # (B·nh·nw, p, p, C)
    return windows


def grid_reverse(windows, grid_size, img_size, bug=""):
    H, W = img_size
    C = windows.shape[-1]
    x = windows.view(-1, H // grid_size[0], W // grid_size[1], grid_size[0], grid_size[1], C)  # (B, nh, nw, p, p, C)
    if bug == "grid-reverse-window-permute":
        x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)              # bug: the window reverse's order
    else:
        x = x.permute(0, 3, 1, 4, 2, 5).contiguous().view(-1, H, W, C)              # (B, p·nh, p·nw, C)
    return x


def gen_relative_position_index(q_size):
    coords = torch.stack(torch.meshgrid(torch.arange(q_size[0]), torch.arange(q_size[1]), indexing="ij")).flatten(1)
    relative_coords = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)    # (N, N, 2)
    relative_coords[:, :, 0] += q_size[0] - 1
    relative_coords[:, :, 1] += q_size[1] - 1
    relative_coords[:, :, 0] *= 2 * q_size[1] - 1
    return relative_coords.sum(-1)                                                   # (N, N)


class RelPosBias(nn.Module):
    def __init__(self, window_size, num_heads, bug=""):
        super().__init__()
        self.window_area = window_size[0] * window_size[1]
        self.bias_shape = (self.window_area,) * 2 + (num_heads,)
        num_relative_distance = (2 * window_size[0] - 1) * (2 * window_size[1] - 1)
        self.relative_position_bias_table = nn.Parameter(torch.randn(num_relative_distance, num_heads) * 0.02)
        self.register_buffer("relative_position_index", gen_relative_position_index(window_size).view(-1),
                             persistent=False)
        self.bug = bug

    def get_bias(self):
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index]  # (N·N, heads)
        if self.bug == "rel-bias-no-permute":
            relative_position_bias = relative_position_bias.view(-1, self.window_area, self.window_area)  # bug
        else:
            relative_position_bias = relative_position_bias.view(self.bias_shape).permute(2, 0, 1)  # (heads, N, N)
        return relative_position_bias.unsqueeze(0).contiguous()                       # (1, heads, N, N)

    def forward(self, attn):
        return attn + self.get_bias()


class AttentionCl(nn.Module):
    def __init__(self, dim, dim_head=32, partition_size=(PARTITION, PARTITION), bug=""):
        super().__init__()
        self.num_heads = dim // dim_head
        self.dim_head = dim_head
        self.scale = dim_head ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.rel_pos = RelPosBias(partition_size, self.num_heads, bug)
        self.proj = nn.Linear(dim, dim)
        self.bug = bug

    def forward(self, x):
        B = x.shape[0]
        restore_shape = x.shape[:-1]
        qkv = self.qkv(x).view(B, -1, self.num_heads, self.dim_head * 3)             # (B, N, h, 3·d)
        q, k, v = qkv.transpose(1, 2).chunk(3, dim=3)                                # (B, h, N, d) each
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)                                               # (B, h, N, N)
        attn = self.rel_pos(attn)
        attn = attn.softmax(dim=-1)
        x = attn @ v                                                                 # (B, h, N, d)
        if self.bug == "merge-no-transpose":
            x = x.reshape(restore_shape + (-1,))                                     # bug: no transpose(1, 2)
        else:
            x = x.transpose(1, 2).reshape(restore_shape + (-1,))                     # (B, p, p, C)
        return self.proj(x)


class PartitionAttentionCl(nn.Module):
    def __init__(self, dim, dim_head, partition_type="block", bug=""):
        super().__init__()
        self.partition_block = partition_type == "block"
        self.partition_size = (PARTITION, PARTITION)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = AttentionCl(dim, dim_head, self.partition_size, bug)
        self.bug = bug

    def _partition_attn(self, x):
        img_size = x.shape[1:3]
        if self.partition_block:
            partitioned = window_partition(x, self.partition_size)                   # (B·nW, p, p, C)
        else:
            partitioned = grid_partition(x, self.partition_size)                     # (B·nW, p, p, C)
        partitioned = self.attn(partitioned)
        if self.partition_block:
            return window_reverse(partitioned, self.partition_size, img_size)        # (B, H, W, C)
        return grid_reverse(partitioned, self.partition_size, img_size, self.bug)    # (B, H, W, C)

    def forward(self, x):
        return x + self._partition_attn(self.norm1(x))


class MaxxVitBlock(nn.Module):
    def __init__(self, dim, dim_head, bug=""):
        super().__init__()
        self.attn_block = PartitionAttentionCl(dim, dim_head, "block", bug)
        self.attn_grid = PartitionAttentionCl(dim, dim_head, "grid", bug)

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)                                                    # (B, H, W, C): channels-last
        x = self.attn_block(x)
        x = self.attn_grid(x)
        return x.permute(0, 3, 1, 2)                                                 # (B, C, H, W)


BUGS = ("grid-reverse-window-permute", "rel-bias-no-permute", "merge-no-transpose")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=15 Wp=21",)
EQUAL = {DIMS[0]: "B=4 D=32 H=4 Hp=12 Wp=12"}


def build(bug="", B=2, D=32, H=4, Hp=15, Wp=21):  # noqa: N803
    torch.manual_seed(0)
    return MaxxVitBlock(D, D // H, bug=bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
