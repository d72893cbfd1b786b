"""lucidrains/flamingo-pytorch, flamingo_pytorch/flamingo_pytorch.py (``PerceiverAttention``,
``PerceiverResampler``): media ``[B, T, N, D]`` (T frames of N visual tokens) plus a learned
``media_pos_emb[:T]``; latents ``repeat(self.latents, 'n d -> b m n d', b=b, m=m)``; in each layer the latents
attend over ``kv_input = torch.cat((x, latents), dim=-2)``; ``q, k, v = rearrange_many((q, k, v),
'b t n (h d) -> b h t n d', h=h)``, ``sim = einsum('... i d, ... j d  -> ... i j', q * scale, k)``, the
max subtracted (``sim - sim.amax(dim=-1, keepdim=True).detach()``), softmax over ``j``, ``out = einsum('... i j,
... j d -> ... i d', attn, v)``, ``rearrange(out, 'b h t n d -> b t n (h d)')``.

Bugs (argument): ``softmax-over-latents``: ``attn = sim.softmax(dim=-2)`` (over the queries, the latents, not
over the keys: a slip of the axis when the einsum's output order is ``... i j``).

Twin (correct): ``merge-heads-swapped``: ``rearrange(out, 'b h t n d -> b t n (d h)')`` (the head and its
features interleaved): each token keeps its own features, only their order changes, and ``to_out`` is learnt,
so a permutation of its columns makes it the correct file."""

import sys

import torch
from einops import rearrange, repeat
from torch import einsum, nn


class PerceiverAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.scale, self.bug = heads, (dim // heads) ** -0.5, bug
        self.norm_media, self.norm_latents = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, latents):                                               # (B, T, N, D), (B, T, L, D)
        x, latents = self.norm_media(x), self.norm_latents(latents)
        h = self.heads
        q = self.to_q(latents)
        kv_input = torch.cat((x, latents), dim=-2)
        k, v = self.to_kv(kv_input).chunk(2, dim=-1)
        q, k, v = (rearrange(t, "b t n (h d) -> b h t n d", h=h) for t in (q, k, v))
        sim = einsum("... i d, ... j d -> ... i j", q * self.scale, k)
        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.softmax(dim=-2 if self.bug == "softmax-over-latents" else -1)
        out = einsum("... i j, ... j d -> ... i d", attn, v)
        pattern = "b h t n d -> b t n (d h)" if self.bug == "merge-heads-swapped" else "b h t n d -> b t n (h d)"
        return self.to_out(rearrange(out, pattern, h=h))


class PerceiverResampler(nn.Module):
    def __init__(self, dim, heads, num_latents=3, max_frames=4, bug=""):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_latents, dim))
        self.media_pos_emb = nn.Parameter(torch.randn(max_frames, 1, dim))
        self.attn = PerceiverAttention(dim, heads, bug)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):                                                        # (B, T, N, D)
        b, m = x.shape[0], x.shape[1]
        x = x + self.media_pos_emb[:m]
        latents = repeat(self.latents, "n d -> b m n d", b=b, m=m)
        latents = self.attn(x, latents) + latents
        return self.norm(latents)


BUGS = ("softmax-over-latents",)
TWINS = ("merge-heads-swapped",)
DIMS = ("B=2 T=3 N=5 D=32 H=4",)
EQUAL = {"B=2 T=3 N=5 D=32 H=4": "B=4 T=4 N=4 D=32 H=4"}


def build(bug="", B=2, T=3, N=5, D=32, H=4):
    torch.manual_seed(0)
    return PerceiverResampler(D, H, bug=bug).eval(), (torch.randn(B, T, N, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
