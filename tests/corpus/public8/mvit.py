"""huggingface/pytorch-image-models, timm/models/mvitv2.py (``MultiScaleAttention``, ``reshape_pre_pool``,
``reshape_post_pool``, ``MultiScaleBlock._shortcut_pool``;
https://github.com/huggingface/pytorch-image-models/blob/main/timm/models/mvitv2.py), after
facebookresearch/mvit: ``qkv(x).reshape(B, N, 3, num_heads, -1).permute(2, 0, 3, 1, 4)`` and ``unbind``;
each of q, k, v pooled on the token grid: the class token cut off (``x[:, :, :1, :]``), ``x.reshape(-1, H,
W, x.shape[-1]).permute(0, 3, 1, 2)``, a depthwise strided ``Conv2d(head_dim, head_dim, 3, stride,
padding=1, groups=head_dim)`` (queries stride 2, keys and values stride 2 here too), then
``x.reshape(-1, num_heads, x.shape[1], L_pooled).transpose(2, 3)`` and the class token joined back;
``LayerNorm(head_dim)`` after each pool; ``(q * scale) @ k.transpose(-2, -1)``, softmax, ``attn @ v``,
``residual_pooling`` (``x = x + q``), ``x.transpose(1, 2).reshape(B, -1, dim_out)``; the block's shortcut
pooled by ``MaxPool2d(3, 2, 1)`` on the same grid (``_shortcut_pool``) so it lines up with the pooled
queries.

Bugs (argument): ``pre-pool-no-permute``: ``x.reshape(-1, C, H, W)`` of token-major ``(B·nh, N, C)`` rows
(the grid read without its permute: each "channel" mixes pixels and features); ``post-pool-no-transpose``:
``x.reshape(-1, num_heads, L_pooled, C)`` of channel-major ``(B·nh, C, h, w)`` (without ``transpose(2,
3)``); ``shortcut-grid-transposed``: the shortcut's grid ``x.reshape(B, W, H, C)`` (rows and columns
swapped before the max-pool, so it no longer lines up with the pooled queries)."""

import sys

import torch
from torch import nn

BUGS = ("pre-pool-no-permute", "post-pool-no-transpose", "shortcut-grid-transposed")
TWINS = ()
DIMS = ("B=2 T=25 Hp=4 Wp=6 D=32 H=2",)
EQUAL = {"B=2 T=25 Hp=4 Wp=6 D=32 H=2": "B=4 T=17 Hp=4 Wp=4 D=32 H=4"}


def reshape_pre_pool(x, feat_size, has_cls_token=True, bug=""):
    H, W = feat_size  # noqa: N806
    if has_cls_token:
        cls_tok, x = x[:, :, :1, :], x[:, :, 1:, :]
    else:
        cls_tok = None
    if bug == "pre-pool-no-permute":
        x = x.reshape(-1, x.shape[-1], H, W)  # bug: token-major rows read as channels
    else:
        x = x.reshape(-1, H, W, x.shape[-1]).permute(0, 3, 1, 2).contiguous()  # (B·nh, C, H, W)
    return x, cls_tok


def reshape_post_pool(x, num_heads, cls_tok=None, bug=""):
    feat_size = [x.shape[2], x.shape[3]]
    L_pooled = x.shape[2] * x.shape[3]  # noqa: N806
    if bug == "post-pool-no-transpose":
        x = x.reshape(-1, num_heads, L_pooled, x.shape[1])  # bug: channel-major read as tokens
    else:
        x = x.reshape(-1, num_heads, x.shape[1], L_pooled).transpose(2, 3)  # (B, nh, L, C)
    if cls_tok is not None:
        x = torch.cat((cls_tok, x), dim=2)  # (B, nh, 1+L, C)
    return x, feat_size


class MultiScaleAttention(nn.Module):
    def __init__(self, dim=32, num_heads=2, stride=2, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.dim_out = dim
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        hd = self.head_dim
        self.pool_q = nn.Conv2d(hd, hd, 3, stride=stride, padding=1, groups=hd, bias=False)
        self.pool_k = nn.Conv2d(hd, hd, 3, stride=stride, padding=1, groups=hd, bias=False)
        self.pool_v = nn.Conv2d(hd, hd, 3, stride=stride, padding=1, groups=hd, bias=False)
        self.norm_q, self.norm_k, self.norm_v = nn.LayerNorm(hd), nn.LayerNorm(hd), nn.LayerNorm(hd)

    def forward(self, x, feat_size):
        B, N, _ = x.shape  # noqa: N806
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)  # (3, B, nh, N, C)
        q, k, v = qkv.unbind(dim=0)
        q, q_tok = reshape_pre_pool(q, feat_size, True, self.bug)
        q = self.pool_q(q)
        q, q_size = reshape_post_pool(q, self.num_heads, q_tok, self.bug)
        q = self.norm_q(q)
        k, k_tok = reshape_pre_pool(k, feat_size, True)
        k = self.pool_k(k)
        k, _ = reshape_post_pool(k, self.num_heads, k_tok)
        k = self.norm_k(k)
        v, v_tok = reshape_pre_pool(v, feat_size, True)
        v = self.pool_v(v)
        v, _ = reshape_post_pool(v, self.num_heads, v_tok)
        v = self.norm_v(v)
        attn = (q * self.scale) @ k.transpose(-2, -1)  # (B, nh, 1+L, 1+L)
        attn = attn.softmax(dim=-1)
        x = attn @ v  # (B, nh, 1+L, C)
        x = x + q  # residual pooling
        x = x.transpose(1, 2).reshape(B, -1, self.dim_out)  # (B, 1+L, D)
        return self.proj(x), q_size


class MultiScaleBlock(nn.Module):
    def __init__(self, dim=32, num_heads=2, bug=""):
        super().__init__()
        self.bug = bug
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiScaleAttention(dim, num_heads, bug=bug)
        self.shortcut_pool_attn = nn.MaxPool2d(3, 2, 1)

    def _shortcut_pool(self, x, feat_size):
        cls_tok, x = x[:, :1, :], x[:, 1:, :]
        B, L, C = x.shape  # noqa: N806
        H, W = feat_size  # noqa: N806
        if self.bug == "shortcut-grid-transposed":
            x = x.reshape(B, W, H, C).permute(0, 3, 1, 2).contiguous()  # bug: rows and columns swapped
        else:
            x = x.reshape(B, H, W, C).permute(0, 3, 1, 2).contiguous()  # (B, C, H, W)
        x = self.shortcut_pool_attn(x)
        x = x.reshape(B, C, -1).transpose(1, 2)  # (B, L, C)
        return torch.cat((cls_tok, x), dim=1)  # (B, 1+L, C)

    def forward(self, x, feat_size):
        x_norm = self.norm1(x)
        x_shortcut = self._shortcut_pool(x, feat_size)
        x, feat_size_new = self.attn(x_norm, feat_size)
        return x_shortcut + x, feat_size_new


class Stage(nn.Module):
    def __init__(self, dim=32, num_heads=2, grid=(4, 6), bug=""):
        super().__init__()
        self.grid = grid
        self.block = MultiScaleBlock(dim, num_heads, bug)

    def forward(self, x):
        return self.block(x, self.grid)[0]


def build(bug="", B=2, Hp=4, Wp=6, D=32, H=2):  # noqa: N803
    """--dims 'B=2 T=25 Hp=4 Wp=6 D=32 H=2': a class token and a 4 x 6 grid of patch tokens (B, 1+Hp·Wp, D)."""
    torch.manual_seed(0)
    return Stage(D, H, (Hp, Wp), bug).eval(), (torch.randn(B, 1 + Hp * Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
