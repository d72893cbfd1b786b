"""lucidrains/perceiver-pytorch, perceiver_pytorch.py (``Attention`` and ``Perceiver.forward``): learned
latents repeated over the batch (``repeat(self.latents, 'n d -> b n d', b=b)``), cross-attention from
the latents to the data with a key padding mask, heads folded into the batch with einops ``'b n (h d) ->
(b h) n d'``, ``einsum('b i d, b j d -> b i j')``, the mask ``repeat(mask, 'b j -> (b h) () j', h=h)``
filled with ``-finfo.max``, softmax over the keys, then a latent self-attention.

Bugs (argument): ``mask-heads-first``: the mask repeated ``'b j -> (h b) () j'``: heads-major against
scores folded batch-major, so each batch entry gets another entry's padding (the einops fold-order slip);
``softmax-latents``: ``sim.softmax(dim=-2)``, over the latents (the queries) instead of the data (Slot
Attention does this on purpose and then renormalises over the keys; Perceiver does not)."""

import sys

import torch
from einops import rearrange, repeat
from torch import einsum, nn


class Attention(nn.Module):
    def __init__(self, query_dim, context_dim, heads, dim_head, bug=""):
        super().__init__()
        inner_dim = dim_head * heads
        self.scale, self.heads, self.bug = dim_head ** -0.5, heads, bug
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def forward(self, x, context=None, mask=None):
        h = self.heads
        context = x if context is None else context
        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> (b h) n d", h=h), (q, k, v))
        sim = einsum("b i d, b j d -> b i j", q, k) * self.scale  # (B*H, L, T)
        if mask is not None:
            mask = rearrange(mask, "b ... -> b (...)")
            max_neg_value = -torch.finfo(sim.dtype).max
            if self.bug == "mask-heads-first":
                mask = repeat(mask, "b j -> (h b) () j", h=h)  # bug: heads-major
            else:
                mask = repeat(mask, "b j -> (b h) () j", h=h)  # (B*H, 1, T)
            sim = sim.masked_fill(~mask, max_neg_value)
        attn = sim.softmax(dim=-2 if self.bug == "softmax-latents" and mask is not None else -1)
        out = einsum("b i j, b j d -> b i d", attn, v)  # (B*H, L, d)
        out = rearrange(out, "(b h) n d -> b n (h d)", h=h)
        return self.to_out(out)


class Perceiver(nn.Module):
    def __init__(self, num_latents=5, latent_dim=32, input_dim=24, heads=4, bug=""):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_latents, latent_dim))
        self.cross_attn = Attention(latent_dim, input_dim, heads, latent_dim // heads, bug)
        self.latent_attn = Attention(latent_dim, latent_dim, heads, latent_dim // heads, bug)

    def forward(self, data, mask):
        b = data.shape[0]
        x = repeat(self.latents, "n d -> b n d", b=b)  # (B, L, D)
        x = self.cross_attn(x, context=data, mask=mask) + x
        return self.latent_attn(x) + x  # (B, L, D)


def build(bug="", B=2, T=7, L=5, D=32, H=4, C=24):
    """--dims 'B=2 T=7 L=5 D=32 H=4 C:features=24': data [B, T, C] with the second entry's last two
    tokens padded (mask True = keep), L latents of width D."""
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[-1, -2:] = False
    return Perceiver(L, D, C, H, bug).eval(), (torch.randn(B, T, C), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
