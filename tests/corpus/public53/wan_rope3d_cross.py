"""Wan-Video/Wan2.1 ``wan/modules/model.py`` (``rope_params``, ``rope_apply``, ``WanSelfAttention``,
``WanI2VCrossAttention``, the ``freqs`` table of ``WanModel.__init__``) and ``wan/modules/attention.py`` (the
``attention`` fallback to ``F.scaled_dot_product_attention``; 2025): video latents patchified into ``seq_len = f *
h * w`` tokens ``[B, L, C]``; ``q = norm_q(self.q(x)).view(b, s, n, d)`` (the flash layout ``[B, L, N, C]``); 3-D
rope: the complex table ``freqs`` (``torch.polar``) split over the head dim ``[c - 2 * (c // 3), c // 3, c // 3]``
(frames, height, width; ``c = d // 2``), per sample ``freqs[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1)``,
``freqs[1][:h].view(1, h, 1, -1)...``, ``freqs[2][:w].view(1, 1, w, -1)...`` concatenated and ``reshape(seq_len,
1, -1)``, the queries ``view_as_complex(x[i, :seq_len].reshape(seq_len, n, -1, 2))`` rotated, ``view_as_real``,
``flatten(2)``; the fallback transposes to ``[B, N, L, C]``, runs SDPA and transposes back; ``flatten(2)``, ``o``.
The image-to-video cross-attention splits its context, the CLIP image tokens first, ``context_img = context[:,
:257]``, ``context = context[:, 257:]`` (here ``M`` image tokens), attends the text (its padding hidden from
``context_lens``) and the image tokens with separate key/value projections, and adds the two.

Bugs: ``rope-height-width-swapped``: the height table laid over the width axis and the width table over the
height axis (``freqs[1][:w].view(1, 1, w, -1)``, ``freqs[2][:h].view(1, h, 1, -1)``: each token rotated by the
other coordinate); ``context-split-text-first``: ``context_img = context[:, -M:]``, ``context = context[:, :-M]``
(the context split as if the text came first: the "image" keys are the last text tokens, the "text" keys start with
the CLIP image tokens)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rope-height-width-swapped", "context-split-text-first")
TWINS = ()
DIMS = ("B=2 T=12 S=5 D=32 H=4 M=3",)
EQUAL = {"B=2 T=12 S=5 D=32 H=4 M=3": "B=4 T=4 S=4 D=32 H=4 M=3"}


def rope_params(max_seq_len, dim, theta=10000):
    freqs = torch.outer(torch.arange(max_seq_len),
                        1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float64).div(dim)))   # (M, dim/2)
    return torch.polar(torch.ones_like(freqs), freqs)                               # complex (M, dim/2)


def rope_apply(x, grid_sizes, freqs, bug=""):
    n, c = x.size(2), x.size(3) // 2
    freqs = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)                  # frames, height, width
    output = []
    for i, (f, h, w) in enumerate(grid_sizes.tolist()):
        seq_len = f * h * w
        x_i = torch.view_as_complex(x[i, :seq_len].to(torch.float64).reshape(seq_len, n, -1, 2))   # (L, N, c)
        if bug == "rope-height-width-swapped":
            fh = freqs[1][:w].view(1, 1, w, -1).expand(f, h, w, -1)
            fw = freqs[2][:h].view(1, h, 1, -1).expand(f, h, w, -1)
        else:
            fh = freqs[1][:h].view(1, h, 1, -1).expand(f, h, w, -1)                 # (f, h, w, c/3)
            fw = freqs[2][:w].view(1, 1, w, -1).expand(f, h, w, -1)
        freqs_i = torch.cat([freqs[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1), fh, fw],
                            dim=-1).reshape(seq_len, 1, -1)                         # (L, 1, c)
        x_i = torch.view_as_real(x_i * freqs_i).flatten(2)                         # (L, N, d)
        x_i = torch.cat([x_i, x[i, seq_len:]])
        output.append(x_i)
    return torch.stack(output).float()                                              # (B, L, N, d)


def attention(q, k, v, attn_mask=None):
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)               # (B, N, L, d)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)              # (B, N, L, d)
    return out.transpose(1, 2).contiguous()                                         # (B, L, N, d)


class WanRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class WanSelfAttention(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, dim // num_heads, bug
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q, self.norm_k = WanRMSNorm(dim), WanRMSNorm(dim)

    def forward(self, x, grid_sizes, freqs):
        b, s, n, d = *x.shape[:2], self.num_heads, self.head_dim
        q = self.norm_q(self.q(x)).view(b, s, n, d)                                 # (B, L, N, d)
        k = self.norm_k(self.k(x)).view(b, s, n, d)
        v = self.v(x).view(b, s, n, d)
        x = attention(rope_apply(q, grid_sizes, freqs, self.bug), rope_apply(k, grid_sizes, freqs, self.bug), v)
        x = x.flatten(2)                                                             # (B, L, C)
        return self.o(x)


class WanI2VCrossAttention(WanSelfAttention):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__(dim, num_heads, bug)
        self.k_img, self.v_img = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.norm_k_img = WanRMSNorm(dim)

    def forward(self, x, context, context_lens, num_img_tokens):
        if self.bug == "context-split-text-first":
            context_img = context[:, -num_img_tokens:]
            context = context[:, :-num_img_tokens]
        else:
            context_img = context[:, :num_img_tokens]                               # (B, M, C)
            context = context[:, num_img_tokens:]                                   # (B, S, C)
        b, n, d = x.size(0), self.num_heads, self.head_dim
        q = self.norm_q(self.q(x)).view(b, -1, n, d)                                # (B, L, N, d)
        k = self.norm_k(self.k(context)).view(b, -1, n, d)                          # (B, S, N, d)
        v = self.v(context).view(b, -1, n, d)
        k_img = self.norm_k_img(self.k_img(context_img)).view(b, -1, n, d)          # (B, M, N, d)
        v_img = self.v_img(context_img).view(b, -1, n, d)
        img_x = attention(q, k_img, v_img)                                           # (B, L, N, d)
        key_mask = torch.arange(context.size(1))[None, :] < context_lens[:, None]    # (B, S)
        x = attention(q, k, v, attn_mask=key_mask[:, None, None, :])                 # (B, L, N, d)
        x = x.flatten(2) + img_x.flatten(2)                                          # (B, L, C)
        return self.o(x)


class WanAttentionBlockSketch(nn.Module):
    def __init__(self, dim, num_heads, bug=""):
        super().__init__()
        self.self_attn = WanSelfAttention(dim, num_heads, bug)
        self.cross_attn = WanI2VCrossAttention(dim, num_heads, bug)
        d = dim // num_heads
        self.freqs = torch.cat([rope_params(64, d - 4 * (d // 6)), rope_params(64, 2 * (d // 6)),
                                rope_params(64, 2 * (d // 6))], dim=1)              # complex (64, d/2)

    def forward(self, x, grid_sizes, context, context_lens, num_img_tokens):
        x = x + self.self_attn(x, grid_sizes, self.freqs)
        return x + self.cross_attn(x, context, context_lens, num_img_tokens)


def build(bug="", B=2, T=12, S=5, D=32, H=4, M=3):
    torch.manual_seed(0)
    grid_sizes = torch.tensor([[2, 2, T // 4]] * B)                                  # (f, h, w) per sample
    context_lens = torch.tensor([S] + [S - 2] * (B - 1))                              # the later prompts padded
    context = torch.randn(B, M + S, D)                                                # CLIP image tokens, then text
    block = WanAttentionBlockSketch(D, H, bug).eval()
    return block, (torch.randn(B, T, D), grid_sizes, context, context_lens, M)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
