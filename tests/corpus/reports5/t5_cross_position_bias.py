"""huggingface/transformers PR #8518 ("[T5] Bug correction & Refactor", merged; patrickvonplaten: "T5 actually
never uses a ``relative_position_bias`` in the ``EncDecSelfAttention`` layer. Previously we used a
bi-directional ``relative_position_bias`` in the ``EncDecSelfAttention``, which is wrong", checked against
the original T5 by an integration test; fixes #8047): the first decoder block built its cross-attention as
``T5Attention(config, has_relative_attention_bias=True)``, so the cross attention added a bidirectional
relative-position bias computed between decoder positions ``arange(T)`` and encoder positions ``arange(S)``
— a distance between places in two different sequences — to its scores. The fix builds the cross
attention with ``has_relative_attention_bias=False``: its position bias is zeros (plus the encoder padding
mask).

T5's idiom: no ``1/sqrt(d)`` scaling, ``shape(states)`` = ``view(B, -1, n_heads, d_kv).transpose(1, 2)``,
``_relative_position_bucket`` (log-spaced buckets, bidirectional in the encoder, causal in the decoder),
``relative_attention_bias`` an ``nn.Embedding(num_buckets, n_heads)``, its values ``permute([2, 0, 1])``,
``scores += position_bias``, ``softmax(scores.float(), dim=-1)``, ``unshape``, ``o`` Linear; the decoder's
self attention with the causal bias, then the cross attention over the encoder states ``(B, S, D)``.

Bug (argument): ``cross-bias``: the cross attention adds a relative-position bias between decoder and
encoder places."""

import math
import sys

import torch
from torch import nn

BUGS = ("cross-bias",)
TWINS = ()
DIMS = ("B=2 T=6 S=8 D=32 H=4",)
EQUAL = {"B=2 T=6 S=8 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    if_large = max_exact + (
        torch.log(relative_position.float() / max_exact + 1e-6) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    if_large = torch.min(if_large, torch.full_like(if_large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, if_large)


class T5Attention(nn.Module):
    def __init__(self, d_model, n_heads, has_relative_attention_bias=False, is_decoder=True, num_buckets=32):
        super().__init__()
        self.n_heads, self.d_kv, self.is_decoder = n_heads, d_model // n_heads, is_decoder
        self.has_relative_attention_bias, self.num_buckets = has_relative_attention_bias, num_buckets
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    def compute_bias(self, query_length, key_length, bidirectional):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position                   # (T, S) [relpos]
        buckets = relative_position_bucket(relative_position, bidirectional, self.num_buckets)
        values = self.relative_attention_bias(buckets)                           # (T, S, H)
        return values.permute([2, 0, 1]).unsqueeze(0)                            # (1, H, T, S) [bias]

    def forward(self, hidden_states, key_value_states=None, mask=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]
        source = hidden_states if key_value_states is None else key_value_states
        key_length = source.shape[1]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.d_kv).transpose(1, 2)

        q, k, v = shape(self.q(hidden_states)), shape(self.k(source)), shape(self.v(source))   # (B, H, *, d)
        scores = torch.matmul(q, k.transpose(3, 2))                                 # (B, H, T, S)
        if position_bias is None:
            if self.has_relative_attention_bias:
                position_bias = self.compute_bias(seq_length, key_length, bidirectional=key_value_states is not None)
            else:
                position_bias = torch.zeros(1, self.n_heads, seq_length, key_length)
            if mask is not None:
                position_bias = position_bias + mask                                # (B, H, T, S)
        scores += position_bias
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, v)                                 # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, self.n_heads * self.d_kv)
        return self.o(attn_output)


class T5DecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.self_attn = T5Attention(d_model, n_heads, has_relative_attention_bias=True)
        self.cross_attn = T5Attention(d_model, n_heads, has_relative_attention_bias=bug == "cross-bias")

    def forward(self, hidden_states, encoder_hidden_states, encoder_attention_mask):
        T = hidden_states.shape[1]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        causal_mask = (1.0 - causal.float())[None, None] * torch.finfo(torch.float32).min      # (1, 1, T, T)
        hidden_states = hidden_states + self.self_attn(hidden_states, mask=causal_mask)
        cross_mask = (1.0 - encoder_attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        return hidden_states + self.cross_attn(hidden_states, encoder_hidden_states, mask=cross_mask)


def build(bug="", B=2, T=6, S=8, D=32, H=4):
    torch.manual_seed(0)
    encoder_attention_mask = torch.ones(B, S, dtype=torch.long)
    encoder_attention_mask[-1, -2:] = 0                                     # the last source padded by 2
    return T5DecoderBlock(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D), encoder_attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
