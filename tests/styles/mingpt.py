"""minGPT-style causal self-attention: separate key, query and value linears, a registered tril mask."""

import math

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 5, "D": 24, "H": 3},
    {"B": 2, "T": 3, "D": 9, "H": 3},    # T == H == d_k
    {"B": 4, "T": 4, "D": 32, "H": 2},   # B == T
]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.key = nn.Linear(n_embd, n_embd)
        self.query = nn.Linear(n_embd, n_embd)
        self.value = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(0.1)
        self.proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size))  # (1, 1, block, block)

    def forward(self, x):
        B, T, C = x.size()                                                           # (B, T, D)
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)    # (B, H, T, d_k) [k]
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, d_k) [q]
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, d_k) [v]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))             # (B, H, T, T) [scores]
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))          # (B, H, T, T)
        att = F.softmax(att, dim=-1)                                                 # (B, H, T, T)
        att = self.attn_drop(att)
        y = att @ v                                                                  # (B, H, T, d_k)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                             # (B, T, D) [merged]
        return self.proj(y)                                                          # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    model = CausalSelfAttention(dims["D"], dims["H"], block_size=dims["T"])
    return model.eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
