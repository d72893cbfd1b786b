"""GPT-NeoX-style attention: fused qkv viewed per head as (B, T, H, 3*d_k), split into q, k, v,
and a causal mask applied with torch.where and finfo.min."""

import math

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
    {"B": 2, "T": 12, "D": 48, "H": 4},  # T == d_k == 3 * H
]


class GPTNeoXAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.norm_factor = math.sqrt(self.head_size)
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states):
        B, T, _ = hidden_states.shape                                            # (B, T, D)
        H, d = self.num_attention_heads, self.head_size
        qkv = self.query_key_value(hidden_states)                                 # (B, T, 3*D) [fused]
        qkv = qkv.view(B, T, H, 3 * d)                                           # (B, T, H, 3*d_k) [per_head]
        query, key, value = qkv.split(d, dim=-1)                                 # 3 x (B, T, H, d_k) [split]
        query = query.permute(0, 2, 1, 3)                                        # (B, H, T, d_k) [q]
        key = key.permute(0, 2, 1, 3)                                            # (B, H, T, d_k) [k]
        value = value.permute(0, 2, 1, 3)                                        # (B, H, T, d_k) [v]
        scores = torch.matmul(query, key.transpose(-1, -2)) / self.norm_factor   # (B, H, T, T) [scores]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)  # (1, 1, T, T)
        mask_value = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)
        scores = torch.where(causal, scores, mask_value)                         # (B, H, T, T)
        weights = nn.functional.softmax(scores, dim=-1)                          # (B, H, T, T) [probs]
        out = torch.matmul(weights, value)                                       # (B, H, T, d_k) [y]
        out = out.permute(0, 2, 1, 3).contiguous()                               # (B, T, H, d_k)
        out = out.view(B, T, H * d)                                              # (B, T, D) [merged]
        return self.dense(out)                                                   # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    return GPTNeoXAttention(dims["D"], dims["H"]).eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
