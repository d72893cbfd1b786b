"""facebookresearch/TimeSformer, timesformer/models/vit.py (``Block`` with ``attention_type='divided_space_time'``,
``Attention``): the tokens are ``[CLS] + F frames x N patches`` in frame-major order; temporal attention on
``rearrange(xt, 'b (h w t) m -> (b h w) t m')`` (here ``'b (f n) d -> (b n) f d'``: the frames of one patch),
back with ``'(b n) f d -> b (f n) d'`` through ``temporal_fc``; spatial attention with the CLS token split off and
repeated per frame (``repeat(init_cls_token, 'b t m -> b (t m)')`` here ``'b 1 d -> (b f) 1 d'``), on
``'b (f n) d -> (b f) n d'``, the per-frame CLS outputs averaged back into one; ``Attention`` is timm's
``qkv.reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)``.

Bugs (argument): ``time-back-patch-major``: the temporal output put back with ``'(b n) f d -> b (n f) d'``
(patch-major), the spatial step then reading it as frame-major: each "frame" it attends within is a mix of
patches at several times; ``time-batch-swapped``: the temporal fold written ``'(n b) f d'`` on the way back but
``'(b n) f d'`` on the way in (a natural slip: the two patterns are written apart): clips swapped between
batch items."""

import sys

import torch
from einops import rearrange, repeat
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def forward(self, x):                                                        # (B', L, C)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                                         # (B', H, L, d)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class DividedBlock(nn.Module):
    def __init__(self, dim, heads, frames, bug=""):
        super().__init__()
        self.frames, self.bug = frames, bug
        self.temporal_norm, self.temporal_attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.temporal_fc = nn.Linear(dim, dim)
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)

    def forward(self, x):                                                        # (B, 1 + F*N, D)
        B, f = x.size(0), self.frames
        n = (x.size(1) - 1) // f
        xt = rearrange(x[:, 1:], "b (f n) d -> (b n) f d", f=f)
        res_t = self.temporal_attn(self.temporal_norm(xt))
        if self.bug == "time-back-patch-major":
            res_t = rearrange(res_t, "(b n) f d -> b (n f) d", b=B)
        elif self.bug == "time-batch-swapped":
            res_t = rearrange(res_t, "(n b) f d -> b (f n) d", b=B)
        else:
            res_t = rearrange(res_t, "(b n) f d -> b (f n) d", b=B)
        xt = x[:, 1:] + self.temporal_fc(res_t)

        cls = repeat(x[:, :1], "b 1 d -> (b f) 1 d", f=f)
        xs = rearrange(xt, "b (f n) d -> (b f) n d", f=f, n=n)
        xs = torch.cat((cls, xs), 1)
        res_s = self.attn(self.norm1(xs))
        cls_out = rearrange(res_s[:, :1], "(b f) 1 d -> b f d", b=B).mean(1, keepdim=True)
        res_s = rearrange(res_s[:, 1:], "(b f) n d -> b (f n) d", b=B)
        return torch.cat((x[:, :1], xt), 1) + torch.cat((cls_out, res_s), 1)


BUGS = ("time-back-patch-major", "time-batch-swapped")
TWINS = ()
DIMS = ("B=2 T=13 D=32 H=4",)
EQUAL = {"B=2 T=13 D=32 H=4": "B=4 T=13 D=32 H=4"}
FRAMES = 4                                                                       # T = 1 + 4 frames x 3 patches


def build(bug="", B=2, T=13, D=32, H=4):
    torch.manual_seed(0)
    return DividedBlock(D, H, FRAMES, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
