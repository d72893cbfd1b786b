"""Cross-attention: queries from x [B, T, D], keys and values from a second sequence [B, S, D],
with a key padding mask on the second sequence."""

import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "S": 10, "D": 32, "H": 4},
    {"B": 2, "T": 5, "S": 5, "D": 20, "H": 4},   # S == T
    {"B": 2, "T": 4, "S": 4, "D": 16, "H": 4},   # S == T == H == d_k
    {"B": 2, "T": 8, "S": 4, "D": 16, "H": 4},   # S == H == d_k
]


class CrossAttention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.h, self.d = heads, d_model // heads
        self.to_q = nn.Linear(d_model, d_model, bias=False)
        self.to_k = nn.Linear(d_model, d_model, bias=False)
        self.to_v = nn.Linear(d_model, d_model, bias=False)
        self.to_out = nn.Linear(d_model, d_model)

    def forward(self, x, context, context_mask):
        B, T, D = x.shape                                                        # (B, T, D)
        S = context.shape[1]
        q = self.to_q(x).view(B, T, self.h, self.d).transpose(1, 2)              # (B, H, T, d_k) [q]
        k = self.to_k(context).view(B, S, self.h, self.d).transpose(1, 2)        # (B, H, S, d_k) [k]
        v = self.to_v(context).view(B, S, self.h, self.d).transpose(1, 2)        # (B, H, S, d_k) [v]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d)                     # (B, H, T, S) [scores]
        keep = context_mask[:, None, None, :]                                    # (B, 1, 1, S)
        scores = scores.masked_fill(~keep, float("-inf"))                        # (B, H, T, S) [masked]
        attn = scores.softmax(dim=-1)                                            # (B, H, T, S) [probs]
        out = attn @ v                                                           # (B, H, T, d_k) [y]
        out = out.transpose(1, 2).reshape(B, T, D)                               # (B, T, D) [merged]
        return self.to_out(out)                                                  # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    B, T, S, D = dims["B"], dims["T"], dims["S"], dims["D"]
    context_mask = torch.ones(B, S, dtype=torch.bool)
    context_mask[-1, S - 2:] = False                                             # the last context is padded
    return CrossAttention(D, dims["H"]).eval(), (torch.randn(B, T, D), torch.randn(B, S, D), context_mask)
