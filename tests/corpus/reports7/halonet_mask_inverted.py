"""lucidrains/halonet-pytorch issue #4 ("[Bug] the attention mask should be reversed": ``masked_fill_(mask,
value)`` fills where the mask is True, so the line should be ``mask = ~mask.bool()``), fixed by PR #6 ("fix:
invert attention padding mask (fixes #4)", merged; lucidrains: "thank you!"): ``HaloAttention`` builds the
mask of its halo windows by unfolding a map of ones (``F.unfold`` gives 1 for a real pixel and 0 for the zero
padding around the image), then ``mask = mask.bool()`` and ``sim.masked_fill_(mask, max_neg_value)``: every
real pixel is masked and every block attends to the padding zeros only (an interior block, all real, is
masked everywhere: a uniform average).

The repository's idiom: ``to_q``/``to_kv``/``to_out``, einops ``rearrange``/``repeat``, queries cut into
``block x block`` blocks ``(b h w) (p1 p2) c``, keys and values unfolded as ``block + 2 * halo`` windows,
heads folded into the batch ``(b h) n d``, ``einsum``, the mask repeated ``() j i -> (b i h) () j``. A 4x4
map (Hp = Wp = 4) of D channels, blocks of 2, a halo of 1 (no relative position here).

Bug (argument): ``mask-not-inverted``: ``mask.bool()`` as the report has it."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import einsum, nn

BUGS = ("mask-not-inverted",)
TWINS = ()
DIMS = ("B=2 Hp=4 Wp=4 D=32 H=4",)
EQUAL = {"B=2 Hp=4 Wp=4 D=32 H=4": "B=4 Hp=4 Wp=4 D=32 H=4"}
BLOCK, HALO = 2, 1


class HaloAttention(nn.Module):
    def __init__(self, dim, heads, block_size=BLOCK, halo_size=HALO, bug=""):
        super().__init__()
        self.block_size, self.halo_size, self.heads, self.bug = block_size, halo_size, heads, bug
        dim_head = dim // heads
        self.scale = dim_head ** -0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        b, c, h, w = x.shape
        block, halo, heads = self.block_size, self.halo_size, self.heads
        q_inp = rearrange(x, "b c (h p1) (w p2) -> (b h w) (p1 p2) c", p1=block, p2=block)
        kv_inp = F.unfold(x, kernel_size=block + halo * 2, stride=block, padding=halo)
        kv_inp = rearrange(kv_inp, "b (c j) i -> (b i) j c", c=c)
        q = self.to_q(q_inp)
        k, v = self.to_kv(kv_inp).chunk(2, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> (b h) n d", h=heads) for t in (q, k, v))
        q = q * self.scale
        sim = einsum("b i d, b j d -> b i j", q, k)                     # ((b blocks h), block², window²)
        mask = torch.ones(1, 1, h, w)
        mask = F.unfold(mask, kernel_size=block + (halo * 2), stride=block, padding=halo)
        mask = repeat(mask, "() j i -> (b i h) () j", b=b, h=heads)
        mask = mask.bool() if self.bug == "mask-not-inverted" else ~mask.bool()   # [mask]
        max_neg_value = -torch.finfo(sim.dtype).max
        sim = sim.masked_fill(mask, max_neg_value)                       # [fill]
        attn = sim.softmax(dim=-1)
        out = einsum("b i j, b j d -> b i d", attn, v)
        out = rearrange(out, "(b h) n d -> b n (h d)", h=heads)
        out = self.to_out(out)
        return rearrange(out, "(b h w) (p1 p2) c -> b c (h p1) (w p2)", b=b, h=h // block, w=w // block,
                         p1=block, p2=block)


def build(bug="", B=2, Hp=4, Wp=4, D=32, H=4):
    torch.manual_seed(0)
    return HaloAttention(D, H, bug=bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
