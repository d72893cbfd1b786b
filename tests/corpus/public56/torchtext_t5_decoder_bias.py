"""pytorch/text, torchtext/models/t5/modules.py (``T5MultiheadAttention._t5_multi_head_attention_forward``,
``._t5_dot_product_attention``, ``._compute_bias``, ``._relative_position_bucket``; torchtext 0.14-0.18): the decoder
self-attention of torchtext's T5 (``is_decoder=True``, ``compute_relative_attention_bias=True``): ``q_proj_weight``,
``k_proj_weight``, ``v_proj_weight`` applied by ``F.linear``, each ``view(bsz, -1, num_heads, head_dim).transpose(1,
2)``; the causal ``attn_mask = torch.triu(ones((tgt_len, tgt_len), dtype=bool), diagonal=1)`` viewed ``(1, 1, x,
y).expand(bsz, num_heads, -1, -1)``, or-ed with ``key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads,
tgt_len, -1)`` (True = pad) by ``attn_mask.logical_or(key_padding_mask)``, then made float by ``zeros_like(...)
.masked_fill(attn_mask, -inf)``; the position bias ``_compute_bias(real_seq_length, src_len,
bidirectional=(not self.is_decoder))``: ``relative_position = memory_position - context_position`` (shape (query_length,
key_length)), bucketed causally (``-torch.min(relative_position, zeros_like(...))``, half the buckets exact, the rest
logarithmic up to ``max_distance``), looked up in ``relative_attention_bias`` (``nn.Embedding(num_buckets,
num_heads)``) and ``permute([2, 0, 1]).unsqueeze(0)`` to (1, num_heads, query_length, key_length); no ``1 / sqrt(d)``
(T5 folds it into the init); ``position_bias.repeat(B, 1, 1, 1)``, ``+= attn_mask``, added to ``q @ k.transpose(3,
2)``, softmax, ``@ v``, ``transpose(1, 2).contiguous().view(B, -1, H * E)``, ``out_proj``. The target batch is
right-padded (``key_padding_mask``).

Bugs: ``bias-permute-keys-first``: ``values.permute([2, 1, 0])`` (the bias laid (heads, key_length, query_length):
square in self-attention, so it adds; each query reads the bias of the transposed offset, the sign of every distance
flipped); ``relative-position-reversed``: ``relative_position = context_position - memory_position`` (the query minus
the key: with ``bidirectional=False`` every key before a query lands in bucket 0, every later key gets the distance
buckets, and the causal mask hides exactly those: the bias is flat over what each query sees);
``padding-and-for-or``: ``attn_mask.logical_and(key_padding_mask)`` (a key is hidden only when it is both later and a
pad: the causal mask is lost for the real tokens)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class T5MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, qkv_dim, is_decoder=True, relative_attention_num_buckets=32,
                 relative_attention_max_distance=128, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.is_decoder = embed_dim, num_heads, is_decoder
        self.inner_dim = qkv_dim * num_heads
        self.q_proj_weight = nn.Parameter(torch.randn(self.inner_dim, embed_dim) / math.sqrt(embed_dim))
        self.k_proj_weight = nn.Parameter(torch.randn(self.inner_dim, embed_dim) / math.sqrt(embed_dim))
        self.v_proj_weight = nn.Parameter(torch.randn(self.inner_dim, embed_dim) / math.sqrt(embed_dim))
        self.out_proj = nn.Linear(self.inner_dim, embed_dim, bias=False)
        self.relative_attention_num_buckets = relative_attention_num_buckets
        self.relative_attention_max_distance = relative_attention_max_distance
        self.relative_attention_bias = nn.Embedding(relative_attention_num_buckets, num_heads)
        self.bug = bug

    def forward(self, query, key_padding_mask):
        bsz, tgt_len, embed_dim = query.shape                                        # (B, T, D)
        head_dim = self.inner_dim // self.num_heads
        q = F.linear(query, self.q_proj_weight)                                      # (B, T, H * E)
        k = F.linear(query, self.k_proj_weight)
        v = F.linear(query, self.v_proj_weight)

        attn_mask = torch.triu(torch.ones((tgt_len, tgt_len), dtype=torch.bool), diagonal=1)   # (T, T)
        x, y = attn_mask.shape
        attn_mask = attn_mask.view(1, 1, x, y).expand(bsz, self.num_heads, -1, -1)   # (B, H, T, T)

        q = q.view(bsz, -1, self.num_heads, head_dim).transpose(1, 2)                # (B, H, T, E)
        k = k.view(bsz, -1, self.num_heads, head_dim).transpose(1, 2)                # (B, H, T, E)
        v = v.view(bsz, -1, self.num_heads, head_dim).transpose(1, 2)                # (B, H, T, E)
        src_len = k.size(2)

        key_padding_mask = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, self.num_heads, tgt_len, -1)
        if self.bug == "padding-and-for-or":
            attn_mask = attn_mask.logical_and(key_padding_mask)                      # (B, H, T, T)
        else:
            attn_mask = attn_mask.logical_or(key_padding_mask)                       # (B, H, T, T)
        tmp_attn_mask = torch.zeros_like(attn_mask, dtype=q.dtype)
        attn_mask = tmp_attn_mask.masked_fill(attn_mask, float("-inf"))

        position_bias = self._compute_bias(tgt_len, src_len, bidirectional=(not self.is_decoder))   # (1, H, T, T)
        attn_output = self._t5_dot_product_attention(q, k, v, position_bias, attn_mask)
        return F.linear(attn_output, self.out_proj.weight)                           # (B, T, D)

    def _t5_dot_product_attention(self, q, k, v, position_bias, attn_mask):
        B, H, _, E = q.shape
        attn = torch.matmul(q, k.transpose(3, 2))                                    # (B, H, T, S)
        position_bias = position_bias.repeat(B, 1, 1, 1)                             # (B, H, T, S)
        position_bias += attn_mask
        attn += position_bias
        attn = F.softmax(attn, dim=-1)
        output = torch.matmul(attn, v)                                               # (B, H, T, E)
        return output.transpose(1, 2).contiguous().view(B, -1, H * E)                # (B, T, H * E)

    def _compute_bias(self, query_length, key_length, bidirectional=True):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]    # (T, 1)
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]       # (1, S)
        if self.bug == "relative-position-reversed":
            relative_position = context_position - memory_position                  # (T, S)
        else:
            relative_position = memory_position - context_position                  # (T, S)
        relative_position_bucket = self._relative_position_bucket(
            relative_position, bidirectional=bidirectional, num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance)
        values = self.relative_attention_bias(relative_position_bucket)              # (T, S, H)
        if self.bug == "bias-permute-keys-first":
            return values.permute([2, 1, 0]).unsqueeze(0)                            # (1, H, S, T)
        return values.permute([2, 0, 1]).unsqueeze(0)                                # (1, H, T, S)

    def _relative_position_bucket(self, relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_buckets = torch.zeros(relative_position.shape, dtype=torch.long)
        if bidirectional:
            num_buckets = num_buckets // 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)).to(torch.long)
        relative_position_if_large = torch.min(relative_position_if_large,
                                               torch.full_like(relative_position_if_large, num_buckets - 1))
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets


BUGS = ("bias-permute-keys-first", "relative-position-reversed", "padding-and-for-or")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    key_padding_mask = torch.zeros(B, T, dtype=torch.bool)
    key_padding_mask[1:, T - 2:] = True                                              # the later targets right-padded
    return T5MultiheadAttention(D, H, D // H, bug=bug).eval(), (torch.randn(B, T, D), key_padding_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
