"""mlfoundations/open_flamingo, open_flamingo/src/helpers.py (``MaskedCrossAttention``, ``GatedCrossAttentionBlock``):
the gated cross-attention layer OpenFlamingo interleaves into the language model. Text ``x [B, T_txt, D]`` attends
over the resampled media ``[B, T_img, n, D]`` (``n`` latents per image, flattened ``"b t n d -> b (t n) d"``);
``media_locations`` (a bool ``[B, T_txt]``, true at each ``<image>`` token) gives each text token its image through
``text_time = media_locations.cumsum(dim=-1)`` against ``media_time = torch.arange(T_img) + 1`` repeated over the
latents ``"j -> 1 1 1 (j n)"``; with ``only_attend_immediate_media`` the mask is ``torch.eq`` (each text token sees
only the latest image before it), the scores masked with ``-finfo.max``, the row max subtracted, ``softmax(dim=-1)``,
and the rows of text before any image (``text_time == 0``) zeroed after the softmax. The block scales the attention by
``attn_gate.tanh()`` (a trained gate here: 0 at init would hide every slip) and adds the residual.

Bugs: ``media-time-from-zero``: ``media_time = torch.arange(T_img)`` (the ``+ 1`` dropped): text after image ``i``
attends image ``i + 1``, the next image, not yet seen; ``latents-outer-repeat``: ``repeat(media_time, "j -> 1 1 1 (n
j)", n=n)``: the mask's key order no longer matches the ``(t n)`` flatten of the media, so each text token sees some
latents of every image and misses some of its own; ``no-zero-without-media``: the ``text_time == 0`` rows not zeroed:
text before the first image has every key masked, so its softmax is uniform over all the media (a leak of every later
image into the prefix)."""

import sys

import torch
from einops import rearrange, repeat
from torch import einsum, nn


def exists(val):
    return val is not None


class MaskedCrossAttention(nn.Module):
    def __init__(self, *, dim, dim_visual, dim_head=64, heads=8, only_attend_immediate_media=True, bug=""):
        super().__init__()
        self.scale, self.heads, self.bug = dim_head ** -0.5, heads, bug
        inner_dim = dim_head * heads
        self.norm = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim_visual, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)
        self.only_attend_immediate_media = only_attend_immediate_media

    def forward(self, x, media, media_locations=None):
        _, T_img, n = media.shape[:3]
        h = self.heads
        x = self.norm(x)
        q = self.to_q(x)                                                             # (b, T_txt, h·d)
        media = rearrange(media, "b t n d -> b (t n) d")                             # (b, T_img·n, d_vis)
        k, v = self.to_kv(media).chunk(2, dim=-1)                                    # (b, T_img·n, h·d)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))     # (b, h, n, d)
        q = q * self.scale
        sim = einsum("... i d, ... j d -> ... i j", q, k)                            # (b, h, T_txt, T_img·n)
        if exists(media_locations):
            media_time = torch.arange(T_img, device=x.device)
            if self.bug != "media-time-from-zero":
                media_time = media_time + 1
            text_time = media_locations.cumsum(dim=-1)                               # (b, T_txt)
            mask_op = torch.eq if self.only_attend_immediate_media else torch.ge
            pattern = "j -> 1 1 1 (n j)" if self.bug == "latents-outer-repeat" else "j -> 1 1 1 (j n)"
            text_to_media_mask = mask_op(rearrange(text_time, "b i -> b 1 i 1"),    # (b, 1, T_txt, 1)
                                         repeat(media_time, pattern, n=n))           # (1, 1, 1, T_img·n)
            sim = sim.masked_fill(~text_to_media_mask, -torch.finfo(sim.dtype).max)
        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.softmax(dim=-1)                                                   # (b, h, T_txt, T_img·n)
        if exists(media_locations) and self.only_attend_immediate_media and self.bug != "no-zero-without-media":
            text_without_media_mask = rearrange(text_time == 0, "b i -> b 1 i 1")    # (b, 1, T_txt, 1)
            attn = attn.masked_fill(text_without_media_mask, 0.0)
        out = einsum("... i j, ... j d -> ... i d", attn, v)                         # (b, h, T_txt, d)
        out = rearrange(out, "b h n d -> b n (h d)")                                 # (b, T_txt, h·d)
        return self.to_out(out)


class GatedCrossAttentionBlock(nn.Module):
    def __init__(self, *, dim, dim_visual, dim_head, heads, ff_mult=2, bug=""):
        super().__init__()
        self.attn = MaskedCrossAttention(dim=dim, dim_visual=dim_visual, dim_head=dim_head, heads=heads, bug=bug)
        self.attn_gate = nn.Parameter(torch.tensor([0.5]))
        self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * ff_mult, bias=False), nn.GELU(),
                                nn.Linear(dim * ff_mult, dim, bias=False))
        self.ff_gate = nn.Parameter(torch.tensor([0.5]))

    def forward(self, x, media, media_locations=None):
        x = self.attn(x, media, media_locations=media_locations) * self.attn_gate.tanh() + x
        return self.ff(x) * self.ff_gate.tanh() + x                                  # (b, T_txt, D)


BUGS = ("media-time-from-zero", "latents-outer-repeat", "no-zero-without-media")
TWINS = ()
DIMS = ("B=2 T=7 N=3 S=5 D=32 H=4",)   # (N: the images, S: each image's resampled latents)
EQUAL = {DIMS[0]: "B=4 T=4 N=2 S=3 D=32 H=4"}


def build(bug="", B=2, T=7, N=3, S=5, D=32, H=4):  # noqa: N803
    """``T`` text tokens with ``N`` ``<image>`` tokens each (from position 1 in even rows, 0 in odd ones, every
    ``T // N`` tokens: odd rows start with an image, even rows have one token of text before it), and ``N`` images
    of ``S`` resampled latents."""
    torch.manual_seed(0)
    media_locations = torch.zeros(B, T, dtype=torch.bool)
    for b in range(B):
        media_locations[b, [(1 - b % 2) + k * (T // N) for k in range(N)]] = True
    model = GatedCrossAttentionBlock(dim=D, dim_visual=D, dim_head=D // H, heads=H, bug=bug)
    return model.eval(), (torch.randn(B, T, D), torch.randn(B, N, S, D), media_locations)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
