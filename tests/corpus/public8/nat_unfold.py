"""SHI-Labs/Neighborhood-Attention-Transformer, classification/nat.py's ``LegacyNeighborhoodAttention``
(mode 1, "implemented using unfold + pad"; https://github.com/SHI-Labs/Neighborhood-Attention-Transformer,
the legacy module before NATTEN's kernels; its relative position bias ``apply_pb`` left out here):
``qkv(x).reshape(B, H, W, 3 * C)``, ``q, x = x[:, :, :, :C], x[:, :, :, C:]``, ``q.reshape(B, N, num_heads,
C // num_heads, 1).transpose(3, 4) * scale``; keys and values of every neighbourhood by im2col,
``unfold(x.permute(0, 3, 1, 2), kernel_size=(k, k), stride=(1, 1), padding=(0, 0)).reshape(B, 2 * C *
num_tokens, Hr, Wr)``, ``pad(x, (pdr, pdr, pdr, pdr), 'replicate')`` (border pixels reuse the nearest full
window), ``.reshape(B, 2, num_heads, C // num_heads, num_tokens, N).permute(1, 0, 5, 2, 4, 3)``; ``attn = q
@ k.transpose(-2, -1)`` (``B x N x H x 1 x num_tokens``), softmax, ``(attn @ v).reshape(B, H, W, C)``.

Bugs (argument): ``unfold-kernel-major``: the im2col channels read kernel-major, ``reshape(B, 2, num_tokens,
num_heads, C // num_heads, N).permute(1, 0, 5, 3, 2, 4)`` (``F.unfold`` lays out ``C · k · k`` channel-major:
each "neighbour" then mixes features and window offsets); ``unfold-no-permute``: ``unfold(x.reshape(B, 2 * C,
H, W))`` (the channels-last map read as channels-first without its permute: each "channel" mixes pixels and
features)."""

import sys

import torch
from torch import nn
from torch.nn.functional import pad, unfold

BUGS = ("unfold-kernel-major", "unfold-no-permute")
TWINS = ()
DIMS = ("B=2 Hp=5 Wp=6 D=32 H=4",)
EQUAL = {"B=2 Hp=5 Wp=6 D=32 H=4": "B=4 Hp=4 Wp=4 D=32 H=4"}


class LegacyNeighborhoodAttention(nn.Module):
    def __init__(self, dim=32, kernel_size=3, num_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads = num_heads
        self.head_dim = dim // self.num_heads
        self.scale = self.head_dim ** -0.5
        self.kernel_size = kernel_size
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, H, W, C = x.shape  # noqa: N806
        N = H * W  # noqa: N806
        num_tokens = int(self.kernel_size ** 2)
        x = self.qkv(x).reshape(B, H, W, 3 * C)
        q, x = x[:, :, :, :C], x[:, :, :, C:]
        q = q.reshape(B, N, self.num_heads, C // self.num_heads, 1).transpose(3, 4) * self.scale  # (B, N, nh, 1, d)
        pd = self.kernel_size - 1
        pdr = pd // 2
        Hr, Wr = H - pd, W - pd  # noqa: N806
        grid = x.reshape(B, 2 * C, H, W) if self.bug == "unfold-no-permute" else x.permute(0, 3, 1, 2)
        x = unfold(grid, kernel_size=(self.kernel_size, self.kernel_size), stride=(1, 1),
                   padding=(0, 0)).reshape(B, 2 * C * num_tokens, Hr, Wr)  # (B, 2·C·k·k, Hr, Wr)
        x = pad(x, (pdr, pdr, pdr, pdr), "replicate")  # (B, 2·C·k·k, H, W)
        if self.bug == "unfold-kernel-major":
            x = x.reshape(B, 2, num_tokens, self.num_heads, C // self.num_heads, N).permute(1, 0, 5, 3, 2, 4)
        else:
            x = x.reshape(B, 2, self.num_heads, C // self.num_heads, num_tokens, N).permute(1, 0, 5, 2, 4, 3)
        k, v = x[0], x[1]  # (B, N, nh, k·k, d)
        attn = q @ k.transpose(-2, -1)  # (B, N, nh, 1, k·k)
        attn = attn.softmax(dim=-1)
        x = attn @ v  # (B, N, nh, 1, d)
        x = x.reshape(B, H, W, C)  # (B, H, W, C)
        return self.proj(x)


def build(bug="", B=2, Hp=5, Wp=6, D=32, H=4):  # noqa: N803
    """--dims 'B=2 Hp=5 Wp=6 D=32 H=4': a channels-last feature map (B, Hp, Wp, D), 3 x 3 neighbourhoods."""
    torch.manual_seed(0)
    return LegacyNeighborhoodAttention(D, 3, H, bug).eval(), (torch.randn(B, Hp, Wp, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
