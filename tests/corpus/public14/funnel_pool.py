"""huggingface/transformers, src/transformers/models/funnel/modeling_funnel.py (v4.40, ``FunnelAttentionStructure
.pool_tensor``, ``FunnelRelMultiheadAttention`` without its relative terms, ``FunnelLayer``): at a block's first
layer the queries are the hidden states mean-pooled along the tokens with stride 2 (``F.avg_pool2d(x[:, None],
(2, 1), stride=(2, 1), ceil_mode=True)[:, 0]``), keys and values at full length; ``q_head``/``k_head``/``v_head``
each ``view(B, T, H, d)``, ``torch.einsum("bind,bjnd->bnij", q_head + r_w_bias, k_head)``, the key padding mask
``(1 - attention_mask[:, None, None].float()) * INF`` subtracted, softmax, ``torch.einsum("bnij,bjnd->bind")``,
``post_proj``, the residual from the pooled queries.

Bugs (argument): ``pool-by-halves``: the pooling written ``x.view(B, 2, T // 2, D).mean(1)`` (each pooled token the
mean of tokens j and j + T/2, not 2j and 2j + 1: the view that splits T the wrong way round)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

INF = 1e6


class FunnelRelMultiheadAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_head = nn.Linear(dim, dim, bias=False)
        self.k_head, self.v_head = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.r_w_bias = nn.Parameter(torch.randn(heads, self.head_dim) * 0.1)
        self.post_proj = nn.Linear(dim, dim)
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, query, key, value, attention_mask):                      # (B, T/2, D), (B, T, D) x2, (B, T)
        B, T_q, _ = query.shape
        T = key.shape[1]
        q_head = self.q_head(query).view(B, T_q, self.heads, self.head_dim)
        k_head = self.k_head(key).view(B, T, self.heads, self.head_dim)
        v_head = self.v_head(value).view(B, T, self.heads, self.head_dim)
        content_score = torch.einsum("bind,bjnd->bnij", q_head * self.head_dim**-0.5 + self.r_w_bias, k_head)
        attn_score = content_score - INF * (1 - attention_mask[:, None, None].float())
        attn_prob = torch.softmax(attn_score, dim=-1)
        attn_vec = torch.einsum("bnij,bjnd->bind", attn_prob, v_head)
        out = self.post_proj(attn_vec.reshape(B, T_q, -1))
        return self.layer_norm(query + out)


class FunnelBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.attention = FunnelRelMultiheadAttention(dim, heads)

    def pool_tensor(self, x):                                                    # (B, T, D)
        if self.bug == "pool-by-halves":
            B, T, D = x.shape
            return x.view(B, 2, T // 2, D).mean(1)
        return F.avg_pool2d(x[:, None], (2, 1), stride=(2, 1), ceil_mode=True)[:, 0]

    def forward(self, hidden, attention_mask):                                  # (B, T, D), (B, T)
        pooled = self.pool_tensor(hidden)
        return self.attention(pooled, hidden, hidden, attention_mask)


BUGS = ("pool-by-halves",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, T - 1:] = 0
    return FunnelBlock(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
