"""huggingface/transformers, src/transformers/models/t5/modeling_t5.py (``T5Attention._relative_position_bucket``,
``compute_bias``: ``relative_position = memory_position - context_position`` of ``torch.arange(query_length)[:,
None]`` and ``torch.arange(key_length)[None, :]``, ``values.permute([2, 0, 1]).unsqueeze(0)``; ``forward``: no
1/√d scaling, the bias added to the scores;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/t5/modeling_t5.py).

Twin (correct): ``query-minus-key``: the distance taken the other way, ``context_position - memory_position``
(DeBERTa's ``build_relative_position``: ``rel_pos_ids = q_ids[:, None] - k_ids[None, :]``), still laid
``[H, q, k]``: a learnt table reads either direction, so the order of the subtraction says nothing of which
axis holds the queries.

Bug (argument): ``bias-transposed``: ``values.permute([2, 1, 0])``, the query and key axes traded. In
self-attention both are ``arange(T)`` of one size read from one input: no name, position or value tells them
apart (the subtraction's order is a convention, as the twin shows), so it is ``?``, never ``✓``."""

import math
import sys

import torch
from torch import nn

BUGS = ("bias-transposed",)
TWINS = ("query-minus-key",)
DIMS = ("B=2 T=6 D=64 H=4",)


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    num_buckets //= 2
    buckets = (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, relative_position, large)


class T5Attention(nn.Module):
    def __init__(self, d, h, buckets=32, bug=""):
        super().__init__()
        self.h, self.hd, self.buckets, self.bug = h, d // h, buckets, bug
        self.q, self.k = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.relative_attention_bias = nn.Embedding(buckets, h)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]   # (T, 1)
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]      # (1, T)
        if self.bug == "query-minus-key":
            relative_position = context_position - memory_position                 # (T, T)
        else:
            relative_position = memory_position - context_position                 # (T, T)
        bucket = relative_position_bucket(relative_position, self.buckets)
        values = self.relative_attention_bias(bucket)                              # (T, T, H)
        if self.bug == "bias-transposed":
            return values.permute([2, 1, 0]).unsqueeze(0)                          # bug: (1, H, k, q)
        return values.permute([2, 0, 1]).unsqueeze(0)                              # (1, H, T, T)

    def forward(self, hidden_states):
        B, T = hidden_states.shape[:2]
        q = self.q(hidden_states).view(B, -1, self.h, self.hd).transpose(1, 2)     # (B, H, T, d_k)
        k = self.k(hidden_states).view(B, -1, self.h, self.hd).transpose(1, 2)     # (B, H, T, d_k)
        v = self.v(hidden_states).view(B, -1, self.h, self.hd).transpose(1, 2)     # (B, H, T, d_k)
        scores = torch.matmul(q, k.transpose(3, 2))                                # (B, H, T, T)
        scores = scores + self.compute_bias(T, T)
        w = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.matmul(w, v)                                                   # (B, H, T, d_k)
        out = out.transpose(1, 2).contiguous().view(B, -1, self.h * self.hd)       # (B, T, D)
        return self.o(out)


def build(bug="", B=2, T=6, D=64, H=4):
    """--dims 'B=2 T=6 D=64 H=4': hidden states (B, T, D)."""
    torch.manual_seed(0)
    return T5Attention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
