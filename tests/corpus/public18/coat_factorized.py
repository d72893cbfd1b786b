"""mlpc-ucsd/CoaT, src/models/coat.py (``FactorAtt_ConvRelPosEnc``, ``ConvRelPosEnc``, ``SerialBlock``): tokens
``(B, N, C)`` with a class token and an ``Hp x Wp`` grid; ``qkv(x).reshape(B, N, 3, h, C // h).permute(2, 0, 3, 1,
4)``; factorized attention: ``k_softmax = k.softmax(dim=2)`` (over the tokens), ``k_softmax_T_dot_v =
einsum('b h n k, b h n v -> b h k v', k_softmax, v)``, ``factor_att = einsum('b h n k, b h k v -> b h n v', q,
k_softmax_T_dot_v)``; the convolutional relative position encoding: ``v`` of the image tokens (class token cut
off) ``rearrange(v_img, 'B h (H W) Ch -> B (h Ch) H W')``, a depthwise Conv2d, ``rearrange(.., 'B (h Ch) H W -> B h
(H W) Ch')``, ``q_img * conv_v_img``, zero-padded for the class token; ``x = scale * factor_att + crpe``;
``x.transpose(1, 2).reshape(B, N, C)``; ``proj``.

Bugs (argument): ``k-softmax-over-channels``: ``k.softmax(dim=-1)`` (over each head's channels, where the tokens
of ``dim=2`` are meant: linear attention's classic slip, the key normalised per token); ``out-reshape-without-
transpose``: ``x.reshape(B, N, C)`` on ``(B, h, N, Ch)``."""

import sys

import torch
from einops import rearrange
from torch import nn


class ConvRelPosEnc(nn.Module):
    def __init__(self, Ch, h):
        super().__init__()
        self.conv = nn.Conv2d(Ch * h, Ch * h, 3, padding=1, groups=Ch * h)

    def forward(self, q, v, size):                                                 # (B, h, N, Ch)
        B, h, N, Ch = q.shape
        H, W = size
        q_img, v_img = q[:, :, 1:, :], v[:, :, 1:, :]
        v_img = rearrange(v_img, "B h (H W) Ch -> B (h Ch) H W", H=H, W=W)
        conv_v_img = rearrange(self.conv(v_img), "B (h Ch) H W -> B h (H W) Ch", h=h)
        EV_hat_img = q_img * conv_v_img
        zero = torch.zeros((B, h, 1, Ch), dtype=q.dtype)
        return torch.cat((zero, EV_hat_img), dim=2)


class FactorAtt_ConvRelPosEnc(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.crpe = ConvRelPosEnc(head_dim, num_heads)

    def forward(self, x, size):                                                    # (B, N, C)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                                             # (B, h, N, Ch)
        k_softmax = k.softmax(dim=-1 if self.bug == "k-softmax-over-channels" else 2)
        k_softmax_T_dot_v = torch.einsum("b h n k, b h n v -> b h k v", k_softmax, v)
        factor_att = torch.einsum("b h n k, b h k v -> b h n v", q, k_softmax_T_dot_v)
        crpe = self.crpe(q, v, size=size)
        x = self.scale * factor_att + crpe
        if self.bug == "out-reshape-without-transpose":
            x = x.reshape(B, N, C)
        else:
            x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class SerialBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.factoratt_crpe = FactorAtt_ConvRelPosEnc(dim, heads, bug)

    def forward(self, x, size):
        return x + self.factoratt_crpe(self.norm1(x), size)


class CoaTStage(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, 4, stride=4)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.block = SerialBlock(dim, heads, bug)

    def forward(self, img):                                                        # (B, 3, 4Hp, 4Wp)
        x = self.patch_embed(img)
        H, W = x.shape[2:]
        x = x.flatten(2).transpose(1, 2)                                             # (B, Hp*Wp, D)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        return self.block(x, (H, W))


BUGS = ("k-softmax-over-channels", "out-reshape-without-transpose")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return CoaTStage(D, H, bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
