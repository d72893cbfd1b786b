"""The Annotated Transformer's MultiHeadedAttention (harvardnlp/annotated-transformer) with h=4, d_model=64,
on 2 sequences of 8 tokens (used by tests/engine/test_diagnose.py and tests/app/test_script.py)."""

import torch
from torch import nn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h: int = 4, d_model: int = 64):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])

    def forward(self, query, key, value):
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)      # (B, h, T, d_k)
                             for lin, x in zip(self.linears, (query, key, value))]
        p_attn = (query @ key.transpose(-2, -1) / self.d_k ** 0.5).softmax(dim=-1)            # (B, h, T, T)
        x = (p_attn @ value).transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)  # (B, T, D)
        return self.linears[-1](x)                                                             # (B, T, D)


if __name__ == "__main__":
    x = torch.randn(2, 8, 64)                                                                  # (B, T, D)
    with torch.no_grad():
        MultiHeadedAttention()(x, x, x)
