"""Grouped-query attention through F.scaled_dot_product_attention, k and v repeated with repeat_interleave."""

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4, "H_kv": 2},
    {"B": 2, "T": 4, "D": 16, "H": 4, "H_kv": 2},   # T == H == d_k
    {"B": 2, "T": 2, "D": 32, "H": 8, "H_kv": 2},   # T == H_kv == B
]


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, d_model // n_heads
        self.wq = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x):
        B, T, D = x.shape                                                        # (B, T, D)
        n_rep = self.n_heads // self.n_kv_heads
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d_k) [q]
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, T, d_k) [k_kv]
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, T, d_k) [v_kv]
        k = k.repeat_interleave(n_rep, dim=1)                                    # (B, H, T, d_k) [k]
        v = v.repeat_interleave(n_rep, dim=1)                                    # (B, H, T, d_k) [v]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)              # (B, H, T, d_k) [y]
        y = y.transpose(1, 2).contiguous().view(B, T, D)                         # (B, T, D) [merged]
        return self.wo(y)                                                        # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    model = GroupedQueryAttention(dims["D"], dims["H"], dims["H_kv"])
    return model.eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
