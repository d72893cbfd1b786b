"""leaderj1001/Attention-Augmented-Conv2d issue #21 ("Bug in forward of attention_augmented_conv.py", with a
worked example: "you should not reshape it directly … but instead you should use ``reshape(attn_out.permute(0,
1, 3, 2), …)``", seconded in the thread): ``AugmentedConv.forward`` computes per-head attention outputs
``attn_out`` of shape ``(B, Nh, H·W, dv/Nh)`` (one row per pixel) and reshaped them straight to ``(B, Nh,
dv/Nh, H, W)``: each head's ``dv/Nh`` "channels" are then runs of H·W/… consecutive values taken across pixels
and features, the pixel axis and the head's features interleaved, before ``combine_heads_2d`` merges the heads
into ``dv`` channels. The fix transposes the last two axes first, so each channel is one feature over every
pixel.

The repository's idiom: ``qkv_conv`` a 1×1 ``Conv2d`` to ``2·dk + dv`` channels, ``split`` into q, k, v,
``split_heads_2d`` (``reshape(B, Nh, C/Nh, H, W)``), ``flat_q = reshape(q, (B, Nh, dkh, H·W))``, q scaled
by ``dkh ** -0.5``, ``logits = matmul(flat_q.transpose(2, 3), flat_k)``, ``softmax(dim=-1)``, ``attn_out =
matmul(weights, flat_v.transpose(2, 3))``, ``combine_heads_2d``, ``attn_out`` a 1×1 conv, concatenated with
the convolution's output. No relative logits (``relative=False``).

Bug (argument): ``reshape-without-transpose``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("reshape-without-transpose",)
TWINS = ()
DIMS = ("B=3 Hp=2 Wp=5 D=32 H=4",)
EQUAL = {"B=3 Hp=2 Wp=5 D=32 H=4": "B=4 Hp=4 Wp=4 D=32 H=4"}


class AugmentedConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dk, dv, Nh, bug=""):
        super().__init__()
        self.dk, self.dv, self.Nh, self.bug = dk, dv, Nh, bug
        self.conv_out = nn.Conv2d(in_channels, out_channels - dv, kernel_size, padding=kernel_size // 2)
        self.qkv_conv = nn.Conv2d(in_channels, 2 * dk + dv, kernel_size=1)
        self.attn_out = nn.Conv2d(dv, dv, kernel_size=1)

    def forward(self, x):
        conv_out = self.conv_out(x)
        batch, _, height, width = conv_out.size()
        flat_q, flat_k, flat_v, q, k, v = self.compute_flat_qkv(x, self.dk, self.dv, self.Nh)
        logits = torch.matmul(flat_q.transpose(2, 3), flat_k)                   # (B, Nh, HW, HW)
        weights = F.softmax(logits, dim=-1)
        attn_out = torch.matmul(weights, flat_v.transpose(2, 3))                # (B, Nh, HW, dvh)
        if self.bug == "reshape-without-transpose":
            attn_out = torch.reshape(attn_out, (batch, self.Nh, self.dv // self.Nh, height, width))   # [merge]
        else:
            attn_out = torch.reshape(attn_out.permute(0, 1, 3, 2),
                                     (batch, self.Nh, self.dv // self.Nh, height, width))           # [merge]
        attn_out = self.combine_heads_2d(attn_out)                               # (B, dv, H, W)
        attn_out = self.attn_out(attn_out)
        return torch.cat((conv_out, attn_out), dim=1)

    def compute_flat_qkv(self, x, dk, dv, Nh):
        N, _, H, W = x.size()
        qkv = self.qkv_conv(x)
        q, k, v = torch.split(qkv, [dk, dk, dv], dim=1)
        q, k, v = self.split_heads_2d(q, Nh), self.split_heads_2d(k, Nh), self.split_heads_2d(v, Nh)
        dkh = dk // Nh
        q = q * dkh ** -0.5
        flat_q = torch.reshape(q, (N, Nh, dk // Nh, H * W))                      # (B, Nh, dkh, HW)
        flat_k = torch.reshape(k, (N, Nh, dk // Nh, H * W))
        flat_v = torch.reshape(v, (N, Nh, dv // Nh, H * W))
        return flat_q, flat_k, flat_v, q, k, v

    def split_heads_2d(self, x, Nh):
        batch, channels, height, width = x.size()
        return torch.reshape(x, (batch, Nh, channels // Nh, height, width))     # (B, Nh, C/Nh, H, W)

    def combine_heads_2d(self, x):
        batch, Nh, dv, H, W = x.size()
        return torch.reshape(x, (batch, Nh * dv, H, W))                          # (B, dv, H, W)


def build(bug="", B=3, Hp=2, Wp=5, D=32, H=4):
    torch.manual_seed(0)
    model = AugmentedConv(D, 2 * D, kernel_size=3, dk=D, dv=D, Nh=H, bug=bug).eval()
    return model, (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
