"""Linear attention (Katharopoulos et al.): elu(x) + 1 feature map, keys contracted with values first."""

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
    {"B": 3, "T": 3, "D": 9, "H": 3},    # B == T == H == d_k
]


def elu_feature_map(x):
    return F.elu(x) + 1


class LinearAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, eps: float = 1e-6):
        super().__init__()
        self.h, self.d = n_heads, d_model // n_heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_model, d_model) for _ in range(3))
        self.out_proj = nn.Linear(d_model, d_model)
        self.eps = eps

    def forward(self, x):
        B, T, D = x.shape                                                        # (B, T, D)
        q = self.q_proj(x).view(B, T, self.h, self.d).permute(0, 2, 1, 3)        # (B, H, T, d_k) [q]
        k = self.k_proj(x).view(B, T, self.h, self.d).permute(0, 2, 1, 3)        # (B, H, T, d_k) [k]
        v = self.v_proj(x).view(B, T, self.h, self.d).permute(0, 2, 1, 3)        # (B, H, T, d_k) [v]
        q, k = elu_feature_map(q), elu_feature_map(k)
        kv = torch.einsum("bhsd,bhse->bhde", k, v)                               # (B, H, d_k, d_k) [kv]
        z = 1 / (torch.einsum("bhtd,bhd->bht", q, k.sum(dim=2)) + self.eps)      # (B, H, T) [z]
        out = torch.einsum("bhtd,bhde,bht->bhte", q, kv, z)                      # (B, H, T, d_k) [y]
        out = out.permute(0, 2, 1, 3).reshape(B, T, D)                           # (B, T, D) [merged]
        return self.out_proj(out)                                                # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    return LinearAttention(dims["D"], dims["H"]).eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
