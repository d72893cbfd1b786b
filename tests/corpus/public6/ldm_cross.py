"""CompVis/latent-diffusion, ldm/modules/attention.py (``CrossAttention``, ``SpatialTransformer``;
https://github.com/CompVis/latent-diffusion): an image ``(B, C, Hp, Wp)`` flattened
``rearrange(x, 'b c h w -> b (h w) c')``; queries from the image, keys and values from a text context
``(B, S, C_ctx)``; heads folded into the batch ``rearrange(t, 'b n (h d) -> (b h) n d')``; scores
``einsum('b i d, b j d -> b i j')``; the context's padding mask ``repeat(mask, 'b j -> (b h) () j')``
filled with ``-finfo.max``; the merge ``rearrange(out, '(b h) n d -> b n (h d)')`` and back to the image
``rearrange(x, 'b (h w) c -> b c h w')``.

Bugs (argument): ``mask-heads-first``: ``repeat(mask, 'b j -> (h b) () j')``: the mask tiled heads-first
against scores folded batch-first, so sequence b's padding lands on other sequences' heads (the
``(b h)`` against ``(h b)`` fold-order mistake);
``merge-heads-first``: ``rearrange(out, '(h b) n d -> b n (h d)')``: the heads unfolded in the other order
than they were folded, so batch entries and heads are swapped in the merge."""

import sys

import torch
from einops import rearrange, repeat
from torch import einsum, nn

BUGS = ("mask-heads-first", "merge-heads-first")
DIMS = ("B=2 Hp=3 Wp=5 S=7 D=32 H=4 C:features=24",)


class CrossAttention(nn.Module):
    def __init__(self, query_dim=32, context_dim=24, heads=4, dim_head=8, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.scale, self.heads, self.bug = dim_head**-0.5, heads, bug
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(0.0))

    def forward(self, x, context, mask=None):
        h = self.heads
        q = self.to_q(x)  # (B, N, D)
        k = self.to_k(context)  # (B, S, D)
        v = self.to_v(context)  # (B, S, D)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> (b h) n d", h=h), (q, k, v))  # (B·H, n, d_k)
        sim = einsum("b i d, b j d -> b i j", q, k) * self.scale  # (B·H, N, S)
        if mask is not None:
            mask = rearrange(mask, "b ... -> b (...)")
            max_neg_value = -torch.finfo(sim.dtype).max
            if self.bug == "mask-heads-first":
                mask = repeat(mask, "b j -> (h b) () j", h=h)  # bug: heads-first tiling
            else:
                mask = repeat(mask, "b j -> (b h) () j", h=h)  # (B·H, 1, S)
            sim.masked_fill_(~mask, max_neg_value)
        attn = sim.softmax(dim=-1)
        out = einsum("b i j, b j d -> b i d", attn, v)  # (B·H, N, d_k)
        if self.bug == "merge-heads-first":
            out = rearrange(out, "(h b) n d -> b n (h d)", h=h)  # bug: unfolded heads-first
        else:
            out = rearrange(out, "(b h) n d -> b n (h d)", h=h)  # (B, N, D)
        return self.to_out(out)


class SpatialCrossAttention(nn.Module):
    """``SpatialTransformer``'s path through one ``BasicTransformerBlock``'s cross-attention."""

    def __init__(self, channels=32, context_dim=24, heads=4, bug=""):
        super().__init__()
        self.norm = nn.GroupNorm(4, channels)
        self.attn2 = CrossAttention(channels, context_dim, heads, channels // heads, bug)

    def forward(self, x, context, mask):
        b, c, h, w = x.shape
        x_in = x
        x = self.norm(x)
        x = rearrange(x, "b c h w -> b (h w) c")
        x = self.attn2(x, context=context, mask=mask) + x
        x = rearrange(x, "b (h w) c -> b c h w", h=h, w=w)
        return x + x_in


def build(bug="", B=2, Hp=3, Wp=5, S=7, D=32, H=4, C=24):  # noqa: N803
    """--dims 'B=2 Hp=3 Wp=5 S=7 D=32 H=4 C:features=24': a latent image and a padded text context."""
    torch.manual_seed(0)
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1:, S - 2 :] = False  # the later sequences end two tokens early
    return SpatialCrossAttention(D, C, H, bug).eval(), (torch.randn(B, D, Hp, Wp), torch.randn(B, S, C), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
