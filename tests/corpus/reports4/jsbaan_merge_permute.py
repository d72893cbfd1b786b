"""jsbaan/transformer-from-scratch PR #6 ("Fix several bugs, one critical", merged; fixes issue #4): after
``scaled_dot_product`` the values are ``(batch, heads, seq_len, qkv_dim)``, and the heads were merged by
``values.reshape(batch_size, sequence_length, num_heads * qkv_dim)`` with no ``permute(0, 2, 1, 3)`` first:
"PyTorch's row-major reshape mixes chunks from different sequence positions into the same token's output
embedding" (the author; the copy task still trained, "the scrambled reshape is consistent enough").

The repository's idiom: one ``qkv_proj`` Linear to ``3·hidden``, reshaped ``(B, T, H, 3·d)`` and permuted
to ``(B, H, T, 3·d)``, ``chunk(3, dim=-1)``, scores ``q @ k^T / sqrt(d)``, a source padding mask
``(B, 1, 1, T)`` (``masked_fill(mask == 0, -inf)``), ``softmax(dim=-1)``, ``attn @ v``, the merge,
``o_proj``.

Bug (argument): ``no-permute``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-permute",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.qkv_dim, self.num_heads, self.hidden_dim, self.bug = hidden_dim // num_heads, num_heads, hidden_dim, bug
        self.qkv_proj = nn.Linear(hidden_dim, 3 * num_heads * self.qkv_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.qkv_dim, hidden_dim, bias=False)

    @staticmethod
    def scaled_dot_product(q, k, v, src_padding_mask=None):
        attn_logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))   # (B, H, T, T)
        if src_padding_mask is not None:
            attn_logits = attn_logits.masked_fill(src_padding_mask == 0, float("-inf"))
        attention = F.softmax(attn_logits, dim=-1)
        return torch.matmul(attention, v), attention                           # (B, H, T, d)

    def forward(self, x, src_padding_mask=None):
        batch_size, sequence_length, hidden_dim = x.size()
        qkv = self.qkv_proj(x)
        qkv = qkv.reshape(batch_size, sequence_length, self.num_heads, 3 * self.qkv_dim).permute(0, 2, 1, 3)
        q, k, v = qkv.chunk(3, dim=-1)                                          # (B, H, T, d)
        values, _ = self.scaled_dot_product(q, k, v, src_padding_mask)
        if self.bug != "no-permute":
            values = values.permute(0, 2, 1, 3)                                 # (B, T, H, d)
        values = values.reshape(batch_size, sequence_length, hidden_dim)        # [merge]
        return self.o_proj(values)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -2:] = 0                                                           # the last sentence padded on the right
    return MultiHeadAttention(D, H, bug).eval(), (torch.randn(B, T, D), mask[:, None, None, :])


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
