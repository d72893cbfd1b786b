"""baofff/U-ViT, libs/uvit.py (``UViT``, ``Block``, ``Attention``, 2023): patches of the noisy image
``PatchEmbed`` (``Conv2d(C, D, p, stride=p).flatten(2).transpose(1, 2)``); the time embedding as one token
``time_embed(timestep_embedding(t)).unsqueeze(dim=1)`` joined *first*, ``cat((time_token, x), dim=1)``, plus
``pos_embed``; ``in_blocks`` each push ``x`` on ``skips``; ``mid_block``; ``out_blocks`` each ``skip_linear(cat([x,
skips.pop()], dim=-1))`` (the long skips taken back in reverse); ``Attention``: ``qkv(x)``, ``einops.rearrange(qkv,
'B L (K H D) -> K B H L D', K=3, H=num_heads)``, ``(q @ k.transpose(-2, -1)) * scale``, ``softmax(dim=-1)``,
``(attn @ v).transpose(1, 2).reshape(B, L, C)``; the time token dropped ``x[:, extras:]``; ``decoder_pred``;
``unpatchify`` (``'B (h w) (p1 p2 C) -> B C (h p1) (w p2)'``).

Bugs (argument): ``merge-without-transpose``: ``(attn @ v).reshape(B, L, C)`` without the ``transpose(1, 2)``
(the heads merged across the tokens: the FuxiCTR issue #30 slip, written back); ``time-token-kept``:
``x[:, :-extras]`` (the last patch dropped and the time token kept as the first patch: a slip from
``cat((x, time_token))`` layouts)."""

import math
import sys

import einops
import torch
from torch import nn


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, L, C)
        B, L, C = x.shape
        q, k, v = einops.rearrange(self.qkv(x), "B L (K H D) -> K B H L D", K=3, H=self.num_heads)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        out = attn @ v                                                             # (B, H, L, D)
        if self.bug != "merge-without-transpose":
            out = out.transpose(1, 2)
        return self.proj(out.reshape(B, L, C))


class Block(nn.Module):
    def __init__(self, dim, num_heads, skip=False, bug=""):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads, bug)
        self.skip_linear = nn.Linear(2 * dim, dim) if skip else None

    def forward(self, x, skip=None):
        if self.skip_linear is not None:
            x = self.skip_linear(torch.cat([x, skip], dim=-1))
        return x + self.attn(self.norm(x))


class UViT(nn.Module):
    def __init__(self, img_size, patch_size, in_chans, embed_dim, num_heads, depth=2, bug=""):
        super().__init__()
        self.bug, self.patch_size, self.in_chans = bug, patch_size, in_chans
        self.patch_embed = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)
        self.time_embed = nn.Linear(embed_dim, embed_dim)
        self.extras = 1
        num_patches = (img_size // patch_size) ** 2
        self.pos_embed = nn.Parameter(torch.randn(1, self.extras + num_patches, embed_dim) * 0.02)
        self.in_blocks = nn.ModuleList(Block(embed_dim, num_heads, bug=bug) for _ in range(depth))
        self.mid_block = Block(embed_dim, num_heads, bug=bug)
        self.out_blocks = nn.ModuleList(Block(embed_dim, num_heads, skip=True, bug=bug) for _ in range(depth))
        self.decoder_pred = nn.Linear(embed_dim, patch_size**2 * in_chans)

    def forward(self, x, timesteps):                                               # (B, C, Hi, Wi), (B,)
        x = self.patch_embed(x).flatten(2).transpose(1, 2)                         # (B, N, D)
        time_token = self.time_embed(timestep_embedding(timesteps, x.size(-1))).unsqueeze(dim=1)
        x = torch.cat((time_token, x), dim=1) + self.pos_embed
        skips = []
        for blk in self.in_blocks:
            x = blk(x)
            skips.append(x)
        x = self.mid_block(x)
        for blk in self.out_blocks:
            x = blk(x, skips.pop())
        x = x[:, :-self.extras] if self.bug == "time-token-kept" else x[:, self.extras:]
        x = self.decoder_pred(x)
        h = int(math.isqrt(x.size(1)))
        return einops.rearrange(x, "B (h w) (p1 p2 C) -> B C (h p1) (w p2)", h=h, p1=self.patch_size,
                                p2=self.patch_size)


BUGS = ("merge-without-transpose", "time-token-kept")
TWINS = ()
DIMS = ("B=2 D=32 H=4",)
EQUAL = {"B=2 D=32 H=4": "B=4 D=32 H=4"}


def build(bug="", B=2, D=32, H=4):
    torch.manual_seed(0)
    return UViT(8, 2, 3, D, H, bug=bug).eval(), (torch.randn(B, 3, 8, 8), torch.tensor([10, 500, 3, 7][:B]))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
