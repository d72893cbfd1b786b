"""pytorch/pytorch issue #67651 ("MultiHeadAttention in quantizable seems incorrect with batch_first=True",
open; the code is unchanged in torch 2.13's ``torch/ao/nn/quantizable/modules/activation.py``): the quantizable
``MultiheadAttention`` moves ``batch_first`` input to sequence-first, splits the heads with
``q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)``, and at the end, when
``batch_first``, merges the ``(bsz * num_heads, tgt_len, head_dim)`` output with
``attn_output.view(bsz, tgt_len, embed_dim)``: the embedding is strung from one head's tokens instead of each
token's heads. The reporter's fix: transpose to ``(tgt_len, bsz * num_heads, head_dim)`` first, as the float
``F.multi_head_attention_forward`` does, view to ``(tgt_len, bsz, embed_dim)`` and move the batch back to
the front.

The idiom (the module's float path, written out): ``linear_Q``/``linear_K``/``linear_V``, the queries scaled
by ``head_dim ** -0.5`` before the product, ``bmm`` scores, ``softmax(dim=-1)``, ``bmm`` with the values, the
merge, ``out_proj``.

Bug (head merge): ``merge-view-batch-first``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("merge-view-batch-first",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, batch_first=True, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.batch_first, self.bug = embed_dim, num_heads, batch_first, bug
        self.head_dim = embed_dim // num_heads
        self.linear_Q = nn.Linear(embed_dim, embed_dim)
        self.linear_K = nn.Linear(embed_dim, embed_dim)
        self.linear_V = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, query, key, value):
        if self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))      # (T, B, D)
        tgt_len, bsz, _ = query.size()
        q = self.linear_Q(query) * self.head_dim ** -0.5                              # (T, B, D)
        k = self.linear_K(key)                                                        # (S, B, D)
        v = self.linear_V(value)                                                      # (S, B, D)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # (B*H, T, d_k)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)       # (B*H, S, d_k)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)       # (B*H, S, d_k)
        weights = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)                  # (B*H, T, S)
        attn_output = torch.bmm(weights, v)                                           # (B*H, T, d_k)
        if self.batch_first and self.bug == "merge-view-batch-first":
            attn_output = attn_output.view(bsz, tgt_len, self.embed_dim)              # (B, T, D)
        else:
            attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz, self.embed_dim)  # (T, B, D)
            if self.batch_first:
                attn_output = attn_output.transpose(0, 1)                             # (B, T, D)
        return self.out_proj(attn_output), weights


class Block(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim)
        self.attn = MultiheadAttention(embed_dim, num_heads, batch_first=True, bug=bug)

    def forward(self, x):
        h = self.norm(x)
        out, _ = self.attn(h, h, h)
        return x + out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
