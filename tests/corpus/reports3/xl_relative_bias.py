"""lucidrains/x-transformers PR #103 ("Fix wrong positional biases", merged: "You are absolutely right, I'm
sorry about this bug"): with Transformer-XL memories the keys are the ``M`` remembered tokens and the ``T``
new ones (``j = M + i``), and the T5-style ``RelativePositionBias`` measured ``k_pos - q_pos`` with the
queries at ``arange(i)``: every new token was placed M positions too early, so its bias favoured the wrong
keys (the causal mask, built with the offset ``j - i``, was right). The fix puts the queries at
``arange(j - i, j)``.

x-transformers' idiom: ``RelativePositionBias`` with an ``nn.Embedding(num_buckets, heads)``, T5's causal
``_relative_position_bucket`` (exact buckets near, log-spaced far), ``rearrange(values, 'i j h -> h i j')``
added to ``qk_dots``; the attention ``rearrange(t, 'b n (h d) -> b h n d')``, the memories ``cat`` before the
keys and values, ``einsum('b h i d, b h j d -> b h i j')``, a causal mask ``triu(j - i + 1)``.

Bug (argument): ``queries-from-zero``: ``q_pos = arange(i)``."""

import math
import sys

import torch
from einops import rearrange
from torch import nn

BUGS = ("queries-from-zero",)
TWINS = ()
DIMS = ("B=2 T=4 M=6 D=32 H=4",)
EQUAL = {"B=2 T=4 M=6 D=32 H=4": "B=4 T=4 M=4 D=32 H=4"}


class RelativePositionBias(nn.Module):
    def __init__(self, scale, heads, num_buckets=8, max_distance=32, bug=""):
        super().__init__()
        self.scale, self.num_buckets, self.max_distance, self.bug = scale, num_buckets, max_distance, bug
        self.relative_attention_bias = nn.Embedding(num_buckets, heads)

    @staticmethod
    def _relative_position_bucket(relative_position, num_buckets, max_distance):
        n = torch.max(-relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = n < max_exact
        val_if_large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                                    * (num_buckets - max_exact)).long()
        val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
        return torch.where(is_small, n, val_if_large)

    def forward(self, qk_dots):
        i, j = qk_dots.shape[-2:]
        q_pos = torch.arange(i) if self.bug == "queries-from-zero" else torch.arange(j - i, j)   # [q-pos]
        k_pos = torch.arange(j)
        rel_pos = k_pos[None, :] - q_pos[:, None]                                 # (i, j)
        rp_bucket = self._relative_position_bucket(rel_pos, self.num_buckets, self.max_distance)
        values = self.relative_attention_bias(rp_bucket)                          # (i, j, h)
        bias = rearrange(values, "i j h -> () h i j")
        return qk_dots + bias * self.scale                                        # [bias]


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.to_q, self.to_k, self.to_v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.to_out = nn.Linear(dim, dim)
        self.rel_pos = RelativePositionBias(self.scale, heads, bug=bug)

    def forward(self, x, mem):
        kv_input = torch.cat((mem, x), dim=-2)                                    # (B, M+T, D)
        q, k, v = self.to_q(x), self.to_k(kv_input), self.to_v(kv_input)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k) * self.scale     # (B, H, T, M+T)
        dots = self.rel_pos(dots)
        i, j = dots.shape[-2:]
        mask = torch.ones((i, j), dtype=torch.bool).triu_(j - i + 1)
        dots = dots.masked_fill(mask, -torch.finfo(dots.dtype).max)
        attn = dots.softmax(dim=-1)
        out = torch.einsum("b h i j, b h j d -> b h i d", attn, v)                # (B, H, T, d)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


def build(bug="", B=2, T=4, M=6, D=32, H=4):
    torch.manual_seed(0)
    return Attention(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, M, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
