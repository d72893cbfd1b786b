"""jaywonchung/BERT4Rec-VAE-Pytorch, models/bert_modules (``BERT``, ``MultiHeadedAttention``, ``Attention``,
commit of 2020): item ids ``(B, T)`` with 0 for padding; ``mask = (x > 0).unsqueeze(1).repeat(1, x.size(1),
1).unsqueeze(1)`` (``(B, 1, T, T)``: each query's row keeps the real keys); token plus positional embedding;
``MultiHeadedAttention``: ``[l(x).view(B, -1, h, d_k).transpose(1, 2) for l, x in zip(self.linear_layers,
(q, k, v))]``, ``scores = q @ k.transpose(-2, -1) / sqrt(d_k)``, ``masked_fill(mask == 0, -1e9)``, ``softmax(dim=
-1)``, ``x.transpose(1, 2).contiguous().view(B, -1, h * d_k)``, ``output_linear``. Bidirectional: no causal mask.

Bugs (argument): ``mask-over-queries``: ``(x > 0).unsqueeze(2).repeat(1, 1, x.size(1)).unsqueeze(1)`` (the
padding masks the queries' rows, not the keys: each real token still attends to the padding, the slip reported
for several BERT4Rec ports); ``scores-scaled-by-heads``: ``/ sqrt(h)`` where ``sqrt(d_k)`` is meant."""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, bug=""):
        super().__init__()
        self.d_k, self.h, self.bug = d_model // h, h, bug
        self.linear_layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(3)])
        self.output_linear = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        batch_size = query.size(0)
        query, key, value = [lin(x).view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linear_layers, (query, key, value))]
        width = self.h if self.bug == "scores-scaled-by-heads" else query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(width)
        scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = F.softmax(scores, dim=-1)
        x = torch.matmul(p_attn, value)
        x = x.transpose(1, 2).contiguous().view(batch_size, -1, self.h * self.d_k)
        return self.output_linear(x)


class BERT(nn.Module):
    def __init__(self, num_items, max_len, hidden, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.token = nn.Embedding(num_items + 2, hidden, padding_idx=0)
        self.position = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.attention = MultiHeadedAttention(heads, hidden, bug)

    def forward(self, x):                                                          # (B, T)
        if self.bug == "mask-over-queries":
            mask = (x > 0).unsqueeze(2).repeat(1, 1, x.size(1)).unsqueeze(1)
        else:
            mask = (x > 0).unsqueeze(1).repeat(1, x.size(1), 1).unsqueeze(1)       # (B, 1, T, T)
        pos = self.position.weight[: x.size(1)].unsqueeze(0).repeat(x.size(0), 1, 1)
        h = self.token(x) + pos                                                      # (B, T, D)
        n = self.norm(h)
        return h + self.attention(n, n, n, mask=mask)


BUGS = ("mask-over-queries", "scores-scaled-by-heads")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    x = torch.randint(1, 40, (B, T))
    x[1, :2] = 0
    return BERT(40, 16, D, H, bug).eval(), (x,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
