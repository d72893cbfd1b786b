"""huggingface/transformers, src/transformers/models/mpnet/modeling_mpnet.py (v4.40, ``MPNetSelfAttention``,
``MPNetEncoder.compute_position_bias``, ``relative_position_bucket``): ``q``/``k``/``v`` linears,
``transpose_for_scores`` (``view(B, T, H, d).permute(0, 2, 1, 3)``); the bidirectional bucket of
``relative_position = memory_position - context_position`` (32 buckets, max distance 128: half for each sign,
exact below 8, log-spaced above); ``relative_attention_bias(rp_bucket)`` ``(T, S, H)`` ``.permute([2, 0, 1])
.unsqueeze(0)`` added to the scores; the padding mask ``(1 - mask[:, None, None, :]) * -1e4`` (the
``get_extended_attention_mask`` of an encoder); ``softmax(dim=-1)``; ``o``.

Bugs (argument): ``padding-mask-on-queries``: the extended mask built ``mask[:, None, :, None]`` (the padded
rows hidden instead of the padded keys: the padded keys stay readable, a slip of the broadcast);
``bias-permute-keys-first``: ``.permute([2, 1, 0])`` (the bias laid out ``(H, S, T)``: each query gets the
bias of the transposed offset, the sign of the relative position silently flipped)."""

import math
import sys

import torch
from torch import nn


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    ret = 0
    n = -relative_position
    num_buckets //= 2
    ret += (n < 0).to(torch.long) * num_buckets
    n = torch.abs(n)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    ret += torch.where(is_small, n, val_if_large)
    return ret


class MPNetSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_attention_heads, self.bug = num_heads, bug
        self.attention_head_size = hidden_size // num_heads
        self.q = nn.Linear(hidden_size, hidden_size)
        self.k = nn.Linear(hidden_size, hidden_size)
        self.v = nn.Linear(hidden_size, hidden_size)
        self.o = nn.Linear(hidden_size, hidden_size)
        self.relative_attention_bias = nn.Embedding(32, num_heads)

    def transpose_for_scores(self, x):
        x = x.view(*x.size()[:-1], self.num_attention_heads, self.attention_head_size)
        return x.permute(0, 2, 1, 3)

    def compute_position_bias(self, x):
        qlen = klen = x.size(1)
        context_position = torch.arange(qlen, dtype=torch.long)[:, None]
        memory_position = torch.arange(klen, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        rp_bucket = relative_position_bucket(relative_position)
        values = self.relative_attention_bias(rp_bucket)                        # (T, S, H)
        order = [2, 1, 0] if self.bug == "bias-permute-keys-first" else [2, 0, 1]
        return values.permute(order).unsqueeze(0).contiguous()

    def forward(self, hidden_states, attention_mask):
        q = self.transpose_for_scores(self.q(hidden_states))
        k = self.transpose_for_scores(self.k(hidden_states))
        v = self.transpose_for_scores(self.v(hidden_states))
        if self.bug == "padding-mask-on-queries":
            extended = attention_mask[:, None, :, None]
        else:
            extended = attention_mask[:, None, None, :]
        extended = (1.0 - extended.float()) * -10000.0
        attention_scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + self.compute_position_bias(hidden_states) + extended
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        c = torch.matmul(attention_probs, v).permute(0, 2, 1, 3).contiguous()
        c = c.view(*c.size()[:-2], self.num_attention_heads * self.attention_head_size)
        return self.o(c)


BUGS = ("padding-mask-on-queries", "bias-permute-keys-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, T - 2:] = 0
    return MPNetSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
