"""Attention written with einops rearrange and torch.einsum (used by tests/engine/test_thirdparty.py)."""

import torch
from einops import rearrange
from torch import nn


class EinopsAttention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)                                    # 3 x (B, T, D)
        q, k, v = (rearrange(t, "b t (h d) -> b h t d", h=self.heads) for t in (q, k, v))  # (B, H, T, d_k)
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5           # (B, H, T, T)
        out = torch.einsum("bhij,bhjd->bhid", sim.softmax(dim=-1), v)               # (B, H, T, d_k)
        return self.out(rearrange(out, "b h t d -> b t (h d)"))                     # (B, T, D)


if __name__ == "__main__":
    print(EinopsAttention(512, 8)(torch.randn(2, 6, 512)).shape)
