"""reczoo/FuxiCTR issue #30 ("MultiHeadAttention bug when num_heads is greater than 1", labelled bug,
fixed): FuxiCTR's ``MultiHeadSelfAttention`` (used by AutoInt, DESTINE and InterHAt) split the heads of
the field embeddings ``(B, F, E)`` with ``query.view(batch_size * num_heads, -1, attention_dim)``, no
transpose: the rows of the ``(B·H, F, d)`` result are runs of consecutive numbers of one sample's memory,
so "head" h of a sample held pieces of several fields' embeddings, and the attention mixed fields with
heads. The fix views ``(B, F, H, d)`` and transposes to ``(B, H, F, d)``.

FuxiCTR's idiom: ``W_q``/``W_k``/``W_v`` as ``nn.Linear(input_dim, attention_dim * num_heads,
bias=False)``, a residual ``W_res``, ``ScaledDotProductAttention`` (``matmul(Q, K^T) * scale``,
``softmax(dim=-1)``, ``matmul(attention, V)``), heads merged back and ReLU on ``output + residual``.
The fields F are the model's tokens (a CTR sample's feature fields).

Bug (argument): ``view-no-transpose``: heads split and merged by ``view`` alone."""

import sys

import torch
from torch import nn

BUGS = ("view-no-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class ScaledDotProductAttention(nn.Module):
    def forward(self, Q, K, V, scale=None):
        scores = torch.matmul(Q, K.transpose(-1, -2))                           # (..., F, F)
        if scale:
            scores = scores / scale
        attention = scores.softmax(dim=-1)
        return torch.matmul(attention, V), attention


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, input_dim, num_heads=1, bug=""):
        super().__init__()
        self.attention_dim = input_dim // num_heads
        self.num_heads, self.bug = num_heads, bug
        self.scale = self.attention_dim ** 0.5
        self.W_q = nn.Linear(input_dim, self.attention_dim * num_heads, bias=False)
        self.W_k = nn.Linear(input_dim, self.attention_dim * num_heads, bias=False)
        self.W_v = nn.Linear(input_dim, self.attention_dim * num_heads, bias=False)
        self.W_res = nn.Linear(input_dim, self.attention_dim * num_heads, bias=False)
        self.dot_product_attention = ScaledDotProductAttention()

    def forward(self, X):
        residual = self.W_res(X)
        query, key, value = self.W_q(X), self.W_k(X), self.W_v(X)              # (B, F, H*d)
        batch_size = query.size(0)
        if self.bug == "view-no-transpose":
            query = query.view(batch_size * self.num_heads, -1, self.attention_dim)   # [split]
            key = key.view(batch_size * self.num_heads, -1, self.attention_dim)       # [split]
            value = value.view(batch_size * self.num_heads, -1, self.attention_dim)   # [split]
            output, _ = self.dot_product_attention(query, key, value, self.scale)
            output = output.view(batch_size, -1, self.num_heads * self.attention_dim)  # [merge]
        else:
            query = query.view(batch_size, -1, self.num_heads, self.attention_dim).transpose(1, 2)
            key = key.view(batch_size, -1, self.num_heads, self.attention_dim).transpose(1, 2)
            value = value.view(batch_size, -1, self.num_heads, self.attention_dim).transpose(1, 2)
            output, _ = self.dot_product_attention(query, key, value, self.scale)     # (B, H, F, d)
            output = output.transpose(1, 2).reshape(batch_size, -1, self.num_heads * self.attention_dim)
        return (output + residual).relu()                                       # (B, F, H*d)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MultiHeadSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
