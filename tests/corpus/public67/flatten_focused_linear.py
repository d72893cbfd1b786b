"""LeapLabTHU/FLatten-Transformer, models/flatten_swin.py (``FocusedLinearAttention``; ICCV 2023): Swin's window
attention replaced by focused linear attention. ``qkv(x).reshape(B, N, 3, C).permute(2, 0, 1, 3)``, ``unbind(0)``;
``k = k + self.positional_encoding`` (one learnt ``(1, window², C)`` table); the kernel ``ReLU(·) + 1e-6`` divided
by ``Softplus(self.scale)``; the focusing function: each token's feature vector raised to ``focusing_factor`` and
rescaled to its old norm (``q_norm = q.norm(dim=-1, keepdim=True)``, ``q = q ** focusing_factor``, ``q = (q /
q.norm(dim=-1, keepdim=True)) * q_norm``); heads by ``rearrange(x, "b n (h c) -> (b h) n c", h=self.num_heads)``;
``z = 1 / (einsum("b i c, b c -> b i", q, k.sum(dim=1)) + 1e-6)``; ``kv = einsum("b j c, b j d -> b c d", k, v)``
and ``x = einsum("b i c, b c d, b i -> b i d", q, kv, z)`` (the branch taken where ``i·j·(c + d) > c·d·(i + j)``;
the other, ``qk`` first, where it is cheaper); a depthwise conv over the window's value map (``rearrange(v, "b (w h)
c -> b c w h")``, ``dwc``, back) added; ``rearrange(x, "(b h) n c -> b n (h c)")``, ``proj``. Here one window per
batch entry (the ``(B·nW, N, C)`` windows arrive from Swin's ``window_partition``), ``N = window²``.

Bugs: ``focus-norm-over-tokens``: ``q.norm(dim=1, keepdim=True)`` and ``k.norm(dim=1, ...)`` for both norms (each
feature's norm over the window's tokens: the rescaling no longer keeps each token's norm, and one token's scale
leaks into the others); ``heads-merge-head-outer``: ``rearrange(x, "(h b) n c -> b n (h c)")`` against the split's
``(b h)`` (the folded batch unfolded in the other order: batch entries swap heads)."""

import sys

import torch
from einops import rearrange
from torch import nn


class FocusedLinearAttention(nn.Module):
    def __init__(self, dim, window_size, num_heads, focusing_factor=3, kernel_size=5, bug=""):
        super().__init__()
        self.dim, self.window_size, self.num_heads, self.bug = dim, window_size, num_heads, bug
        head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.focusing_factor = focusing_factor
        self.dwc = nn.Conv2d(head_dim, head_dim, kernel_size=kernel_size, groups=head_dim, padding=kernel_size // 2)
        self.scale = nn.Parameter(torch.zeros(size=(1, 1, dim)))
        self.positional_encoding = nn.Parameter(torch.randn(size=(1, window_size[0] * window_size[1], dim)) * 0.02)

    def forward(self, x):                                                            # (B·nW, N, C)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, C).permute(2, 0, 1, 3)                    # (3, B, N, C)
        q, k, v = qkv.unbind(0)
        k = k + self.positional_encoding
        focusing_factor = self.focusing_factor
        kernel_function = nn.ReLU()
        scale = nn.Softplus()(self.scale)
        q = kernel_function(q) + 1e-6
        k = kernel_function(k) + 1e-6
        q = q / scale
        k = k / scale
        norm_dim = 1 if self.bug == "focus-norm-over-tokens" else -1
        q_norm = q.norm(dim=norm_dim, keepdim=True)
        k_norm = k.norm(dim=norm_dim, keepdim=True)
        q = q ** focusing_factor
        k = k ** focusing_factor
        q = (q / q.norm(dim=norm_dim, keepdim=True)) * q_norm
        k = (k / k.norm(dim=norm_dim, keepdim=True)) * k_norm
        q, k, v = (rearrange(x, "b n (h c) -> (b h) n c", h=self.num_heads) for x in [q, k, v])   # (B·h, N, c)
        i, j, c, d = q.shape[-2], k.shape[-2], k.shape[-1], v.shape[-1]
        z = 1 / (torch.einsum("b i c, b c -> b i", q, k.sum(dim=1)) + 1e-6)           # (B·h, N)
        if i * j * (c + d) > c * d * (i + j):
            kv = torch.einsum("b j c, b j d -> b c d", k, v)                         # (B·h, c, d)
            x = torch.einsum("b i c, b c d, b i -> b i d", q, kv, z)                 # (B·h, N, d)
        else:
            qk = torch.einsum("b i c, b j c -> b i j", q, k)                         # (B·h, N, N)
            x = torch.einsum("b i j, b j d, b i -> b i d", qk, v, z)                 # (B·h, N, d)
        num = int(v.shape[1] ** 0.5)
        feature_map = rearrange(v, "b (w h) c -> b c w h", w=num, h=num)             # (B·h, c, w, w)
        feature_map = rearrange(self.dwc(feature_map), "b c w h -> b (w h) c")       # (B·h, N, c)
        x = x + feature_map
        if self.bug == "heads-merge-head-outer":
            x = rearrange(x, "(h b) n c -> b n (h c)", h=self.num_heads)             # (B, N, C)
        else:
            x = rearrange(x, "(b h) n c -> b n (h c)", h=self.num_heads)             # (B, N, C)
        return self.proj(x)


BUGS = ("focus-norm-over-tokens", "heads-merge-head-outer")
TWINS = ()
DIMS = ("B=2 T=9 D=32 H=4",)   # (T: the tokens of one 3 x 3 window)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=9, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    window = int(T ** 0.5)
    model = FocusedLinearAttention(D, (window, window), H, bug=bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
