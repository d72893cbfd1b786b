"""BLOOM-style attention: fused qkv viewed per head as (B, T, H, 3, d_k), [B*H, T, d_k] batches,
an ALiBi tensor added through baddbmm, and a causal mask filled with finfo.min."""

import math

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
    {"B": 3, "T": 3, "D": 12, "H": 3},   # B == T == H
]


def build_alibi_tensor(attention_mask, num_heads, dtype):
    B, T = attention_mask.shape                                                  # (B, T)
    base = 2 ** (-(2 ** -(math.log2(num_heads) - 3)))
    slopes = torch.pow(torch.tensor(base), torch.arange(1, num_heads + 1))       # (H,)
    positions = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]  # (B, 1, T)
    alibi = slopes[..., None] * positions                                        # (B, H, T)
    return alibi.reshape(B * num_heads, 1, T).to(dtype)                          # (B*H, 1, T)


class BloomAttention(nn.Module):
    def __init__(self, hidden_size, n_head):
        super().__init__()
        self.num_heads, self.head_dim = n_head, hidden_size // n_head
        self.inv_norm_factor = 1.0 / math.sqrt(self.head_dim)
        self.beta = 1.0
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.attention_dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, attention_mask):
        B, T, _ = hidden_states.shape                                            # (B, T, D)
        H, d = self.num_heads, self.head_dim
        alibi = build_alibi_tensor(attention_mask, H, hidden_states.dtype)       # (B*H, 1, T)
        fused = self.query_key_value(hidden_states)                              # (B, T, 3*D) [fused]
        fused = fused.view(B, T, H, 3, d)                                        # (B, T, H, qkv, d_k) [per_head]
        q = fused[..., 0, :].transpose(1, 2).reshape(B * H, T, d)                # (B*H, T, d_k) [q]
        k = fused[..., 1, :].permute(0, 2, 3, 1).reshape(B * H, d, T)            # (B*H, d_k, T) [k]
        v = fused[..., 2, :].transpose(1, 2).reshape(B * H, T, d)                # (B*H, T, d_k) [v]
        scores = alibi.baddbmm(batch1=q, batch2=k, beta=self.beta, alpha=self.inv_norm_factor)  # (B*H, T, T) [bmm]
        scores = scores.view(B, H, T, T)                                         # (B, H, T, T) [scores]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)[None, None]          # (1, 1, T, T)
        scores = scores.masked_fill(causal, torch.finfo(scores.dtype).min)       # (B, H, T, T) [masked]
        probs = F.softmax(scores, dim=-1, dtype=torch.float32)                   # (B, H, T, T)
        probs = self.attention_dropout(probs)
        probs = probs.view(B * H, T, T)                                          # (B*H, T, T)
        context = torch.bmm(probs, v)                                            # (B*H, T, d_k) [y]
        context = context.view(B, H, T, d).permute(0, 2, 1, 3)                   # (B, T, H, d_k)
        context = context.reshape(B, T, H * d)                                   # (B, T, D) [merged]
        return self.dense(context)                                               # (B, T, D)


def build(dims):
    torch.manual_seed(0)
    B, T = dims["B"], dims["T"]
    attention_mask = torch.ones(B, T, dtype=torch.long)
    return BloomAttention(dims["D"], dims["H"]).eval(), (torch.randn(B, T, dims["D"]), attention_mask)
