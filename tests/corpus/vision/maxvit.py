"""lucidrains/vit-pytorch, vit_pytorch/max_vit.py (https://github.com/lucidrains/vit-pytorch/blob/main/
vit_pytorch/max_vit.py): ``MaxViT``'s block attention (``'b d (x w1) (y w2) -> b x y w1 w2 d'``) and grid
attention (``'b d (w1 x) (w2 y) -> b x y w1 w2 d'``), and ``Attention`` (windows folded into the batch,
``'b x y w1 w2 d -> (b x y) (w1 w2) d'``, a relative position bias from an ``nn.Embedding`` indexed by the
``rel_pos_indices`` buffer built in ``__init__``, ``rearrange(bias, 'i j h -> h i j')``).

Bug (argument): ``grid-as-block``: the grid step written with the block pattern, so the second
attention repeats the first's windows (a copy-paste slip)."""

import sys

import torch
from einops import rearrange
from torch import einsum, nn


class Attention(nn.Module):
    def __init__(self, dim, dim_head=8, window_size=2):
        super().__init__()
        self.heads = dim // dim_head
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.rel_pos_bias = nn.Embedding((2 * window_size - 1) ** 2, self.heads)
        pos = torch.arange(window_size)
        grid = torch.stack(torch.meshgrid(pos, pos, indexing="ij"))
        grid = rearrange(grid, "c i j -> (i j) c")
        rel_pos = rearrange(grid, "i ... -> i 1 ...") - rearrange(grid, "j ... -> 1 j ...")
        rel_pos += window_size - 1
        rel_pos_indices = (rel_pos * torch.tensor([2 * window_size - 1, 1])).sum(dim=-1)
        self.register_buffer("rel_pos_indices", rel_pos_indices, persistent=False)

    def forward(self, x):
        _batch, height, width, window_height, window_width, _, h = *x.shape, self.heads
        x = self.norm(x)
        x = rearrange(x, "b x y w1 w2 d -> (b x y) (w1 w2) d")  # (B*nW, ws*ws, D)
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), (q, k, v))  # (B*nW, H, ws*ws, d)
        q = q * self.scale
        sim = einsum("b h i d, b h j d -> b h i j", q, k)  # (B*nW, H, ws*ws, ws*ws)
        bias = self.rel_pos_bias(self.rel_pos_indices)  # (ws*ws, ws*ws, H)
        sim = sim + rearrange(bias, "i j h -> h i j")
        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b h j d -> b h i d", attn, v)  # (B*nW, H, ws*ws, d)
        out = rearrange(out, "b h (w1 w2) d -> b w1 w2 (h d)", w1=window_height, w2=window_width)
        out = self.to_out(out)
        return rearrange(out, "(b x y) ... -> b x y ...", x=height, y=width)  # (B, x, y, ws, ws, D)


class MaxViTBlock(nn.Module):
    def __init__(self, dim=24, w=2, bug=""):
        super().__init__()
        self.w, self.bug = w, bug
        self.block_attn = Attention(dim, window_size=w)
        self.grid_attn = Attention(dim, window_size=w)

    def forward(self, x):
        w = self.w
        x = rearrange(x, "b d (x w1) (y w2) -> b x y w1 w2 d", w1=w, w2=w)  # block-like attention
        x = x + self.block_attn(x)
        x = rearrange(x, "b x y w1 w2 d -> b d (x w1) (y w2)")
        if self.bug == "grid-as-block":
            x = rearrange(x, "b d (x w1) (y w2) -> b x y w1 w2 d", w1=w, w2=w)  # bug: block again
        else:
            x = rearrange(x, "b d (w1 x) (w2 y) -> b x y w1 w2 d", w1=w, w2=w)  # grid-like attention
        x = x + self.grid_attn(x)
        return rearrange(x, "b x y w1 w2 d -> b d (w1 x) (w2 y)")


def build(bug=""):
    """--dims B=2,D=24,H=3 with the input named "B D Hp Wp" (a 4 × 6 map, windows of 2 × 2)."""
    torch.manual_seed(0)
    return MaxViTBlock(bug=bug).eval(), (torch.randn(2, 24, 4, 6),)


if __name__ == "__main__":
    import shapetrace
    model, inputs = build(*sys.argv[1:2])
    shapetrace.name(inputs[0], "B D Hp Wp")
    with torch.no_grad():
        model(*inputs)
