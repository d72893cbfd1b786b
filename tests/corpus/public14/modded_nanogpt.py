"""KellerJordan/modded-nanogpt, train_gpt.py (2025 record, ``CausalSelfAttention``, ``Rotary``, ``norm``): one
``qkv_w`` parameter, ``F.linear(x, qkv_w).view(B, T, 3 * H, d).chunk(3, dim=-2)``; q and k RMS-normalised over
the head width (``F.rms_norm(x, (x.size(-1),))``); rotary with ``x1, x2 = x.chunk(2, dim=-1)`` and a ``[T, d/2]``
cos/sin table broadcast as ``cos[None, :, None, :]``; the value embedding mixed into v with ``lambdas``
(``v = lambdas[0] * v + lambdas[1] * ve.view_as(v)``); ``F.scaled_dot_product_attention(q.transpose(1, 2), ...,
is_causal=True)``; ``y.transpose(1, 2).contiguous().view(B, T, H * d)``.

Bugs (argument): ``ve-head-major``: the value embedding viewed ``(B, H, T, d)`` (``ve.view(B, H, T, -1)
.transpose(1, 2)``, the head-major layout of the attention call written onto a token-major tensor: each token's
value gets pieces of other tokens' embeddings, later ones included); ``norm-over-heads``: q/k normalised with
``F.rms_norm(x, x.shape[-2:])`` (the normalised shape taken as the last two sizes, ``(H, d)``: one norm across all
heads of a token, not one per head)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, max_seq_len=64):
        super().__init__()
        angular_freq = (1 / 1024) ** torch.linspace(0, 1, steps=dim // 4, dtype=torch.float32)
        angular_freq = torch.cat([angular_freq, angular_freq.new_zeros(dim // 4)])
        theta = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), angular_freq)
        self.register_buffer("cos", theta.cos(), persistent=False)
        self.register_buffer("sin", theta.sin(), persistent=False)

    def forward(self, x):                                                        # (B, T, H, d)
        cos, sin = self.cos[None, : x.size(-3), None, :], self.sin[None, : x.size(-3), None, :]
        x1, x2 = x.float().chunk(2, dim=-1)
        y1, y2 = x1 * cos + x2 * sin, x1 * (-sin) + x2 * cos
        return torch.cat((y1, y2), 3).type_as(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.qkv_w = nn.Parameter(torch.randn(3 * dim, dim) * dim**-0.5)
        self.lambdas = nn.Parameter(torch.tensor([0.5, 0.5]))
        self.rotary = Rotary(self.head_dim)
        self.c_proj = nn.Linear(dim, dim, bias=False)

    def norm(self, x):
        shape = x.shape[-2:] if self.bug == "norm-over-heads" else (x.size(-1),)
        return F.rms_norm(x, shape)

    def forward(self, x, ve):                                                    # (B, T, D), (B, T, D)
        B, T = x.size(0), x.size(1)
        q, k, v = F.linear(x, self.qkv_w).view(B, T, 3 * self.heads, self.head_dim).chunk(3, dim=-2)
        q, k = self.norm(q), self.norm(k)
        q, k = self.rotary(q), self.rotary(k)
        if self.bug == "ve-head-major":
            ve = ve.view(B, self.heads, T, self.head_dim).transpose(1, 2)
        else:
            ve = ve.view_as(v)
        v = self.lambdas[0] * v + self.lambdas[1] * ve
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                           scale=0.12).transpose(1, 2)
        return self.c_proj(y.contiguous().view(B, T, self.heads * self.head_dim))


class GPT(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.embed, self.value_embed = nn.Embedding(vocab, dim), nn.Embedding(vocab, dim)
        self.attn = CausalSelfAttention(dim, heads, bug)

    def forward(self, idx):                                                      # (B, T)
        x = F.rms_norm(self.embed(idx), (self.embed.embedding_dim,))
        return x + self.attn(x, self.value_embed(idx))


BUGS = ("ve-head-major", "norm-over-heads")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return GPT(50, D, H, bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
