"""baidu/ERNIE-Image issue #6 ("Question about RoPE implementation: Possible shape mismatch?"): the DiT's
``freqs_cis`` held the angles interleaved, ``[θ0, θ0, θ1, θ1, …]`` (features 2i and 2i+1 share a frequency),
while ``apply_rotary_emb`` rotated Megatron-style blocks (``x1, x2 = x.chunk(2, -1)``, ``cat((-x2, x1))``:
feature i paired with i + r/2), so each rotated pair mixed two angles and ``q·k`` stopped depending on the
relative position alone. The consistent table for the blocked rotation is ``cat([freqs, freqs], -1)``.

The idiom: image patches ``[B, S, D]`` with a 2-D grid position per patch (row, column), angles built
per axis and concatenated, ``freqs_cis`` ``[B, S, 1, r]`` broadcast over the heads of a ``[B, S, H, d]``
(``bshd``) layout, a partial rotary (the first ``r = d / 2`` features rotated, the rest passed through),
``scaled_dot_product_attention`` on ``transpose(1, 2)`` heads, no mask (a DiT is bidirectional).

Bug (argument): ``interleaved-table``: the angles repeated pairwise (``repeat_interleave(2)``) under the
blocked rotation."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("interleaved-table",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def apply_rotary_emb(x_in, freqs_cis):                                        # (B, S, H, d), (B, S, 1, r)
    rot_dim = freqs_cis.shape[-1]
    x, x_pass = x_in[..., :rot_dim], x_in[..., rot_dim:]
    cos_, sin_ = torch.cos(freqs_cis).to(x.dtype), torch.sin(freqs_cis).to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    x_rotated = torch.cat((-x2, x1), dim=-1)                                  # (B, S, H, r)
    return torch.cat((x * cos_ + x_rotated * sin_, x_pass), dim=-1)           # (B, S, H, d)


class RopeEmbedder(nn.Module):
    def __init__(self, rot_dim, theta=10000.0, bug=""):
        super().__init__()
        self.axis_dim, self.bug = rot_dim // 2, bug                           # (half the table per grid axis)
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, self.axis_dim, 2).float() / self.axis_dim))

    def forward(self, ids):                                                   # (B, S, 2): row, column
        freqs = torch.cat([ids[..., i, None].float() * self.inv_freq for i in range(2)], dim=-1)   # (B, S, r/2)
        if self.bug == "interleaved-table":
            freqs = freqs.repeat_interleave(2, dim=-1)                        # (B, S, r): θ0 θ0 θ1 θ1 ...
        else:
            freqs = torch.cat([freqs, freqs], dim=-1)                         # (B, S, r): θ0 θ1 ... θ0 θ1 ...
        return freqs[:, :, None, :]                                           # (B, S, 1, r)


class ErnieImageAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Linear(dim, dim) for _ in range(4))
        self.rope = RopeEmbedder(self.head_dim // 2, bug=bug)

    def forward(self, hidden, image_ids):                                     # (B, S, D), (B, S, 2)
        b, s, _ = hidden.shape
        q = self.to_q(hidden).view(b, s, self.heads, self.head_dim)           # (B, S, H, d)
        k = self.to_k(hidden).view(b, s, self.heads, self.head_dim)
        v = self.to_v(hidden).view(b, s, self.heads, self.head_dim)
        freqs_cis = self.rope(image_ids)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)  # [rope]
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        out = out.transpose(1, 2).reshape(b, s, -1)                           # (B, S, D)
        return self.to_out(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    rows, cols = (2, T // 2) if T % 2 == 0 else (1, T)
    grid = torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(T, 2)
    return ErnieImageAttention(D, H, bug).eval(), (torch.randn(B, T, D), grid.expand(B, T, 2))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
