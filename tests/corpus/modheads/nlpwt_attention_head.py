"""nlp-with-transformers/notebooks, ``03_transformer-anatomy.ipynb`` (Tunstall, von Werra and Wolf, *Natural
Language Processing with Transformers*, chapter 3): ``scaled_dot_product_attention(query, key, value, mask)``
(``torch.bmm(query, key.transpose(1, 2)) / sqrt(dim_k)`` with ``dim_k = query.size(-1)``, ``masked_fill(mask ==
0, -inf)``, ``F.softmax(scores, dim=-1)``, ``torch.bmm(weights, value)``); ``AttentionHead`` with ``self.q``,
``self.k``, ``self.v`` each ``nn.Linear(embed_dim, head_dim)``; ``MultiHeadAttention`` with ``self.heads =
nn.ModuleList([AttentionHead(embed_dim, head_dim) for _ in range(num_heads)])``, ``torch.cat([h(hidden_state)
for h in self.heads], dim=-1)`` and ``self.output_linear``. Here with the chapter's decoder mask
(``torch.tril(torch.ones(seq_len, seq_len)).unsqueeze(0)``).

Bugs (argument): ``softmax-over-queries``: ``F.softmax(scores, dim=1)`` (the slip of a ``[B, T, T]`` read as
``[T, T]`` with a batch in front: dim 1 is the queries); ``scale-embed-dim``: ``dim_k`` read from the hidden
state's width, ``hidden_state.size(-1)``, not the head's (the slip of Karpathy's ``C**-0.5``, ng-video-lecture
PR #6)."""

import sys
from math import sqrt

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-over-queries", "scale-embed-dim")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def scaled_dot_product_attention(query, key, value, mask=None, dim_k=None, bug=""):
    dim_k = dim_k or query.size(-1)
    scores = torch.bmm(query, key.transpose(1, 2)) / sqrt(dim_k)                  # (B, T, T)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = F.softmax(scores, dim=1 if bug == "softmax-over-queries" else -1)
    return torch.bmm(weights, value)                                               # (B, T, head_dim)


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, bug=""):
        super().__init__()
        self.q = nn.Linear(embed_dim, head_dim)
        self.k = nn.Linear(embed_dim, head_dim)
        self.v = nn.Linear(embed_dim, head_dim)
        self.bug = bug

    def forward(self, hidden_state, mask=None):
        dim_k = hidden_state.size(-1) if self.bug == "scale-embed-dim" else None
        return scaled_dot_product_attention(self.q(hidden_state), self.k(hidden_state), self.v(hidden_state),
                                            mask, dim_k, self.bug)                 # (B, T, head_dim)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        head_dim = embed_dim // num_heads
        self.heads = nn.ModuleList([AttentionHead(embed_dim, head_dim, bug) for _ in range(num_heads)])
        self.output_linear = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_state):
        seq_len = hidden_state.size(1)
        mask = torch.tril(torch.ones(seq_len, seq_len)).unsqueeze(0)                # (1, T, T)
        x = torch.cat([h(hidden_state, mask) for h in self.heads], dim=-1)        # (B, T, H·head_dim)
        return self.output_linear(x)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MultiHeadAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
