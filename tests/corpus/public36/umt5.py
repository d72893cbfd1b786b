"""huggingface/transformers, src/transformers/models/umt5/modeling_umt5.py (v4.46, ``UMT5Attention``,
``_relative_position_bucket``, ``compute_bias``): UMT5's encoder: unlike T5, every layer owns its relative
attention bias (``has_relative_attention_bias`` on all layers); bidirectional buckets (half the buckets per
direction, exact below ``max_exact``, log-spaced above up to ``max_distance``), ``relative_position =
memory_position - context_position`` (key minus query), ``Embedding(num_buckets, H)`` ``permute([2, 0, 1])
.unsqueeze(0)``; no ``1/sqrt(d)`` scaling (T5's init folds it); ``_shape`` ``view(B, -1, H, d).transpose(1, 2)``;
the padding mask as ``(1 - mask) · min`` added to the bias; ``softmax(-1, float)``; ``permute(0, 2, 1, 3)
.contiguous().view(B, T, inner_dim)``.

Bugs: ``bias-view-heads-last``: the bias ``(T_q, T_k, H)`` ``view(1, H, T_q, T_k)``ed
instead of permuted (the heads and positions mixed; the slip of reading ``permute`` as ``view``);
``relative-query-minus-key`` (twin): ``context_position - memory_position`` (query minus key): the table's
directions swapped, a relabelling of learned rows (values decide, no name)."""

import math
import sys

import torch
from torch import nn


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    num_buckets //= 2
    relative_buckets = (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    log_ratio = torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, large)


class UMT5Attention(nn.Module):
    def __init__(self, D, H, d_kv, num_buckets=32, bug=""):
        super().__init__()
        self.n_heads, self.key_value_proj_dim, self.inner_dim, self.bug = H, d_kv, H * d_kv, bug
        self.q, self.k = nn.Linear(D, H * d_kv, bias=False), nn.Linear(D, H * d_kv, bias=False)
        self.v, self.o = nn.Linear(D, H * d_kv, bias=False), nn.Linear(H * d_kv, D, bias=False)
        self.relative_attention_num_buckets = num_buckets
        self.relative_attention_bias = nn.Embedding(num_buckets, H)

    def _shape(self, projection):
        new_shape = projection.size()[:-1] + (self.n_heads, self.key_value_proj_dim)
        return projection.view(new_shape).permute(0, 2, 1, 3)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        if self.bug == "relative-query-minus-key":
            relative_position = context_position - memory_position
        else:
            relative_position = memory_position - context_position
        bucket = relative_position_bucket(relative_position, self.relative_attention_num_buckets)
        values = self.relative_attention_bias(bucket)
        if self.bug == "bias-view-heads-last":
            return values.view(1, self.n_heads, query_length, key_length)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden_states, attention_mask):
        batch_size, seq_length = hidden_states.shape[:2]
        query_states, key_states = self._shape(self.q(hidden_states)), self._shape(self.k(hidden_states))
        value_states = self._shape(self.v(hidden_states))
        attention_scores = torch.matmul(query_states, key_states.transpose(-1, -2))
        position_bias = self.compute_bias(seq_length, seq_length)
        position_bias = position_bias + attention_mask
        attention_scores = attention_scores + position_bias
        attn_weights = nn.functional.softmax(attention_scores.float(), dim=-1).type_as(attention_scores)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.permute(0, 2, 1, 3).contiguous().view(batch_size, seq_length, -1)
        return self.o(attn_output)


class UMT5Encoder(nn.Module):
    def __init__(self, vocab, D, H, d_kv, layers=2, bug=""):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, D)
        self.attn = nn.ModuleList([UMT5Attention(D, H, d_kv, bug=bug) for _ in range(layers)])
        self.ln1 = nn.ModuleList([nn.RMSNorm(D) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.RMSNorm(D) for _ in range(layers)])
        self.wi = nn.ModuleList([nn.Linear(D, 2 * D, bias=False) for _ in range(layers)])
        self.wo = nn.ModuleList([nn.Linear(2 * D, D, bias=False) for _ in range(layers)])
        self.final_layer_norm = nn.RMSNorm(D)

    def forward(self, input_ids, attention_mask):
        hidden_states = self.embed_tokens(input_ids)
        extended = (1.0 - attention_mask[:, None, None, :].to(hidden_states.dtype)) * torch.finfo(torch.float32).min
        for attn, ln1, ln2, wi, wo in zip(self.attn, self.ln1, self.ln2, self.wi, self.wo):
            hidden_states = hidden_states + attn(ln1(hidden_states), extended)
            hidden_states = hidden_states + wo(nn.functional.gelu(wi(ln2(hidden_states))))
        return self.final_layer_norm(hidden_states)


BUGS = ("bias-view-heads-last",)
TWINS = ("relative-query-minus-key",)
DIMS = ("B=2 T=6 D=32 H=4 d_kv=8",)


def build(bug="", B=2, T=6, D=32, H=4, d_kv=8):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -2:] = 0                                               # entry 1 right-padded
    return UMT5Encoder(40, D, H, d_kv, bug=bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
