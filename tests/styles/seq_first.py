"""fairseq-style seq-first attention: [T, B, D] input, view(T, B*H, d_k).transpose(0, 1), bmm."""

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 4, "T": 4, "D": 16, "H": 4},   # B == T == H == d_k
    {"B": 3, "T": 8, "D": 64, "H": 8},   # T == H == d_k
]
NAMES = ("T B D",)


class SeqFirstAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))

    def forward(self, query):
        tgt_len, bsz, embed_dim = query.size()                                   # (T, B, D)
        q = self.q_proj(query) * self.scaling                                    # (T, B, D)
        k = self.k_proj(query)                                                   # (T, B, D)
        v = self.v_proj(query)                                                   # (T, B, D)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # (B*H, T, d_k) [q]
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)       # (B*H, T, d_k) [k]
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)       # (B*H, T, d_k) [v]
        attn_weights = torch.bmm(q, k.transpose(1, 2))                           # (B*H, T, T) [scores]
        attn_probs = F.softmax(attn_weights, dim=-1)                             # (B*H, T, T) [probs]
        attn = torch.bmm(attn_probs, v)                                          # (B*H, T, d_k) [y]
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)   # (T, B, D) [merged]
        return self.out_proj(attn)                                               # (T, B, D)


def build(dims):
    torch.manual_seed(0)
    return SeqFirstAttention(dims["D"], dims["H"]).eval(), (torch.randn(dims["T"], dims["B"], dims["D"]),)
