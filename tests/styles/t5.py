"""T5-style attention: narrow heads (H * d_kv != d_model), no 1/sqrt(d_k) scaling, a relative
position bias from an embedding of bucketed distances."""

import torch
from torch import nn
from torch.nn import functional as F

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4, "d_k": 16},   # H * d_k = 64 != D
    {"B": 2, "T": 4, "D": 8, "H": 4, "d_k": 4},     # T == H == d_k, H * d_k = 16 != D
    {"B": 2, "T": 8, "D": 64, "H": 2, "d_k": 8},    # T == d_k, H * d_k = 16 != D
]


class T5Attention(nn.Module):
    def __init__(self, d_model, d_kv, n_heads, num_buckets=8):
        super().__init__()
        self.n_heads, self.key_value_proj_dim = n_heads, d_kv
        self.inner_dim = n_heads * d_kv
        self.num_buckets = num_buckets
        self.q = nn.Linear(d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, d_model, bias=False)
        self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length)[:, None]                   # (T, 1)
        memory_position = torch.arange(key_length)[None, :]                      # (1, T)
        half = self.num_buckets // 2
        bucket = (memory_position - context_position).clamp(-half + 1, half - 1) + half - 1  # (T, T)
        values = self.relative_attention_bias(bucket)                            # (T, T, H)
        return values.permute([2, 0, 1]).unsqueeze(0)                            # (1, H, T, T)

    def forward(self, hidden_states):
        B, T = hidden_states.shape[:2]                                           # (B, T, D)
        H, d = self.n_heads, self.key_value_proj_dim
        q = self.q(hidden_states).view(B, -1, H, d).transpose(1, 2)              # (B, H, T, d_k) [q]
        k = self.k(hidden_states).view(B, -1, H, d).transpose(1, 2)              # (B, H, T, d_k) [k]
        v = self.v(hidden_states).view(B, -1, H, d).transpose(1, 2)              # (B, H, T, d_k) [v]
        scores = torch.matmul(q, k.transpose(3, 2))                              # (B, H, T, T) [scores]
        scores += self.compute_bias(T, T)                                        # (B, H, T, T)
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)         # (B, H, T, T)
        attn_output = torch.matmul(attn_weights, v)                              # (B, H, T, d_k) [y]
        attn_output = attn_output.transpose(1, 2).contiguous().view(B, -1, self.inner_dim)  # (B, T, H*d_k) [merged]
        return self.o(attn_output)                                               # (B, T, D) [out]


def build(dims):
    torch.manual_seed(0)
    model = T5Attention(dims["D"], dims["d_k"], dims["H"])
    return model.eval(), (torch.randn(dims["B"], dims["T"], dims["D"]),)
