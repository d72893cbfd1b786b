"""google-deepmind/recurrentgemma, recurrentgemma/torch/modules.py (``LocalAttentionBlock``, 2024): ``queries =
proj_q(x)``, one key/value head (``proj_k, proj_v`` to ``head_dim``), ``rearrange('... (n h) -> ... n h')``;
rotary on the first half of each head's features (``apply_rope(x, segment_pos, max_wavelength=10_000)``: the
half ``x_rope, x = split(x, 2)`` rotated, the rest passed through); ``logits = einsum('btnh,bsnh->bnts',
queries, keys) * head_dim**-0.5``; ``_compute_forward_pass_mask``: ``causal = segment_pos[:, :, None] >=
segment_pos[:, None, :]`` and ``within_window = segment_pos[:, :, None] - segment_pos[:, None, :] <
window_size``; ``masked = where(mask[:, None], logits, finfo.min)``; ``softmax(-1)``; ``einsum('bnts,bsnh->btnh',
probs, values)``; ``proj_final``.

Bugs (argument): ``window-off-by-one``: ``<= window_size`` (one key more than the window: a natural slip);
``window-direction-reversed``: ``segment_pos[:, None, :] - segment_pos[:, :, None] < window_size`` (the
difference taken key minus query: every later key is "within the window", the causal mask alone keeps it
causal, so the window never cuts)."""

import sys

import torch
from einops import rearrange
from torch import nn


def apply_rope(inputs, positions, max_wavelength=10_000):                          # (B, T, N, h), (B, T)
    x_rope, x = torch.chunk(inputs, 2, dim=-1)
    half = x_rope.shape[-1] // 2
    freq = torch.arange(half, dtype=torch.float32)
    timescale = max_wavelength ** (2 * freq / x_rope.shape[-1])
    sinusoid = positions[..., None].float() / timescale                          # (B, T, h/4)
    sin, cos = torch.sin(sinusoid)[:, :, None], torch.cos(sinusoid)[:, :, None]
    first, second = torch.chunk(x_rope, 2, dim=-1)
    first_part = first * cos - second * sin
    second_part = second * cos + first * sin
    return torch.cat([first_part, second_part, x], dim=-1)


class LocalAttentionBlock(nn.Module):
    def __init__(self, width, num_heads, window_size, bug=""):
        super().__init__()
        self.num_heads, self.window_size, self.bug = num_heads, window_size, bug
        self.head_dim = width // num_heads
        self.proj_q = nn.Linear(width, width, bias=False)
        self.proj_k = nn.Linear(width, self.head_dim, bias=False)
        self.proj_v = nn.Linear(width, self.head_dim, bias=False)
        self.proj_final = nn.Linear(width, width)

    def mask(self, segment_pos):
        causal = segment_pos[:, :, None] >= segment_pos[:, None, :]
        if self.bug == "window-direction-reversed":
            within = segment_pos[:, None, :] - segment_pos[:, :, None] < self.window_size
        elif self.bug == "window-off-by-one":
            within = segment_pos[:, :, None] - segment_pos[:, None, :] <= self.window_size
        else:
            within = segment_pos[:, :, None] - segment_pos[:, None, :] < self.window_size
        return causal & within                                                     # (B, T, S)

    def forward(self, x, segment_pos):                                             # (B, T, D), (B, T)
        queries = rearrange(self.proj_q(x), "... (n h) -> ... n h", n=self.num_heads)
        keys = rearrange(self.proj_k(x), "... (n h) -> ... n h", n=1)
        values = rearrange(self.proj_v(x), "... (n h) -> ... n h", n=1)
        queries, keys = apply_rope(queries, segment_pos), apply_rope(keys, segment_pos)
        logits = torch.einsum("btnh,bsnh->bnts", queries, keys.expand(-1, -1, self.num_heads, -1))
        logits = logits * self.head_dim**-0.5
        masked = torch.where(self.mask(segment_pos)[:, None], logits, torch.finfo(logits.dtype).min)
        probs = masked.softmax(dim=-1)
        encoded = torch.einsum("bnts,bsnh->btnh", probs, values.expand(-1, -1, self.num_heads, -1))
        return self.proj_final(rearrange(encoded, "... n h -> ... (n h)"))


BUGS = ("window-off-by-one", "window-direction-reversed")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return LocalAttentionBlock(D, H, 3, bug).eval(), (torch.randn(B, T, D), torch.arange(T).expand(B, T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
