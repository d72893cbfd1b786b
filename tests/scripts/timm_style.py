"""timm-style: reshape(B, N, 3, H, d_k).permute(2, 0, 3, 1, 4).unbind(0) (used by tests/engine/test_thirdparty.py)."""

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape                                                            # (B, N, D)
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)            # (B, N, 3, H, d_k)
        qkv = qkv.permute(2, 0, 3, 1, 4)                                             # (3, B, H, N, d_k)
        q, k, v = qkv.unbind(0)                                                      # 3 x (B, H, N, d_k)
        attn = (q * self.scale) @ k.transpose(-2, -1)                                # (B, H, N, N)
        attn = attn.softmax(dim=-1)                                                  # (B, H, N, N)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)                              # (B, N, D)
        return self.proj(x)                                                          # (B, N, D)


if __name__ == "__main__":
    print(Attention(512, 8)(torch.randn(2, 6, 512)).shape)
