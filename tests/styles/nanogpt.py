"""nanoGPT-style causal self-attention: one fused c_attn, split, view + transpose, a causal mask with -inf."""

import math

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
    {"B": 3, "T": 8, "D": 64, "H": 8},   # T == H == d_k, B != T
]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.n_head, self.n_embd = n_head, n_embd
        causal = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", causal.view(1, 1, block_size, block_size))  # (1, 1, block, block)

    def forward(self, x):
        B, T, C = x.size()                                                       # (B, T, D)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                       # 3 x (B, T, D) [split]
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)          # (B, H, T, d_k) [k]
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)          # (B, H, T, d_k) [q]
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)          # (B, H, T, d_k) [v]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))         # (B, H, T, T) [scores]
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))      # (B, H, T, T) [masked]
        att = F.softmax(att, dim=-1)                                             # (B, H, T, T) [probs]
        att = self.attn_dropout(att)
        y = att @ v                                                              # (B, H, T, d_k) [y]
        y = y.transpose(1, 2).contiguous().view(B, T, C)                         # (B, T, D) [merged]
        return self.resid_dropout(self.c_proj(y))                                # (B, T, D) [out]


def build(dims):
    torch.manual_seed(0)
    model = CausalSelfAttention(dims["D"], dims["H"], block_size=dims["T"] + 3)
    return model.eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
