"""Grouped-query attention, llama-style repeat_kv with expand + reshape (used by tests/engine/test_thirdparty.py)."""

import torch
from torch import nn
from torch.nn import functional as F


def repeat_kv(x, n_rep: int):
    B, H_kv, T, d_k = x.shape                                                        # (B, H_kv, T, d_k)
    x = x[:, :, None, :, :].expand(B, H_kv, n_rep, T, d_k)                           # (B, H_kv, n_rep, T, d_k)
    return x.reshape(B, H_kv * n_rep, T, d_k)                                        # (B, H, T, d_k)


class GQA(nn.Module):
    def __init__(self, d_model: int, heads: int, kv_heads: int):
        super().__init__()
        self.h, self.h_kv, self.d = heads, kv_heads, d_model // heads
        self.wq = nn.Linear(d_model, heads * self.d, bias=False)
        self.wk = nn.Linear(d_model, kv_heads * self.d, bias=False)
        self.wv = nn.Linear(d_model, kv_heads * self.d, bias=False)
        self.wo = nn.Linear(heads * self.d, d_model, bias=False)

    def forward(self, x):
        B, T, _ = x.shape                                                            # (B, T, D)
        q = self.wq(x).view(B, T, self.h, self.d).transpose(1, 2)                    # (B, H, T, d_k)
        k = self.wk(x).view(B, T, self.h_kv, self.d).transpose(1, 2)                 # (B, H_kv, T, d_k)
        v = self.wv(x).view(B, T, self.h_kv, self.d).transpose(1, 2)                 # (B, H_kv, T, d_k)
        k, v = repeat_kv(k, self.h // self.h_kv), repeat_kv(v, self.h // self.h_kv)  # (B, H, T, d_k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)                  # (B, H, T, d_k)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))                          # (B, T, D)


if __name__ == "__main__":
    print(GQA(512, 8, 2)(torch.randn(3, 6, 512)).shape)
