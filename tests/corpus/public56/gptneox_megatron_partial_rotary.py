"""EleutherAI/gpt-neox, megatron/model/transformer.py (``ParallelSelfAttention.forward`` and ``.attention``, 2023-2024)
with megatron/model/positional_embeddings.py (``RotaryEmbedding``, ``rotate_half``, ``apply_rotary_pos_emb``) and the
``gpt2_attention_mask_func`` / ``FusedScaleMaskSoftmax`` it uses (one model-parallel partition): sequence-first
activations ``[sq, b, h]``; ``query_key_value`` to ``[sq, b, (np * 3 * hn)]`` viewed ``[sq, b, np, 3 * hn]`` and cut
by ``split_tensor_along_last_dim(mixed_x_layer, 3)``; partial rotary on ``rotary_ndims = int(hn * rotary_pct)``
(``query_rot, query_pass = query_layer[..., :rotary_ndims], query_layer[..., rotary_ndims:]``, the table ``[s, 1, 1,
rotary_ndims]`` from ``cat((freqs, freqs), -1)``, then ``torch.cat((query_layer, query_pass), dim=-1)``); the scores
by ``torch.baddbmm`` on ``query_layer.view(sq, b * np, hn).transpose(0, 1)`` and ``key_layer ... .transpose(0,
1).transpose(1, 2)`` with ``alpha=1 / norm_factor``, where ``apply_query_key_layer_scaling`` has multiplied
``norm_factor`` by ``layer_number`` and the softmax multiplies the scores back by ``coeff = layer_number`` (in fp32,
for fp16 range); ``viewed [b, np, sq, sk]``; the ltor mask (``tril(ones) < 0.5``, True = hidden) filled by
``masked_fill_(mask, finfo.min)``; softmax; ``torch.bmm(attention_probs, value_layer.transpose(0, 1))`` viewed ``[b, np,
sq, hn]``; ``context_layer.permute(2, 0, 1, 3)`` to ``[sq, b, np, hn]``, viewed ``[sq, b, hp]``; ``dense``. Layer 3
of a Pythia-style stack (``rotary_pct = 0.25``).

Bugs: ``key-rot-unrotated``: ``key_layer = torch.cat((key_rot, key_pass), dim=-1)`` (the rotated keys returned by
``apply_rotary_fn`` are dropped for the slice they were made from: only the queries carry positions, so the scores
depend on the query's absolute place instead of the distance); ``query-reshape-for-transpose``: the
queries given to ``baddbmm`` as ``query_layer.reshape(b * np, sq, hn)`` for ``.transpose(0, 1)`` (the reshape keeps
the shape the comment asks for, but each "head" row now holds a run of the flat ``[sq, b * np]`` order: tokens
of several heads and batch entries); ``layer-scaling-not-undone``: the softmax
without the ``* coeff`` (``norm_factor`` still carries ``layer_number``: each score divided by 3 more, the attention
three times too flat)."""

import math
import sys

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq_len):
        t = torch.arange(seq_len).type_as(self.inv_freq)                             # [s]
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)                            # [s, rot / 2]
        emb = torch.cat((freqs, freqs), dim=-1)                                      # [s, rot]
        return emb.cos()[:, None, None, :], emb.sin()[:, None, None, :]              # [s, 1, 1, rot]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=x1.ndim - 1)


def apply_rotary_pos_emb(q, k, cos, sin, offset=0):
    cos, sin = cos[offset: q.shape[0] + offset, ...], sin[offset: q.shape[0] + offset, ...]
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class ParallelSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, layer_number=3, rotary_pct=0.25, bug=""):
        super().__init__()
        self.hidden_size_per_partition = hidden_size
        self.num_attention_heads_per_partition = num_attention_heads
        self.hidden_size_per_attention_head = hidden_size // num_attention_heads
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.layer_number = layer_number
        self.norm_factor = math.sqrt(self.hidden_size_per_attention_head) * layer_number   # query_key_layer_scaling
        self.rotary_ndims = int(self.hidden_size_per_attention_head * rotary_pct)
        self.rotary_emb = RotaryEmbedding(self.rotary_ndims)
        self.bug = bug

    def attention(self, query_layer, key_layer, value_layer, attention_mask):
        # [b, np, sq, sk]
        output_size = (query_layer.size(1), query_layer.size(2), query_layer.size(0), key_layer.size(0))
        query_layer = query_layer.view(output_size[2], output_size[0] * output_size[1], -1)   # [sq, b * np, hn]
        key_layer = key_layer.view(output_size[3], output_size[0] * output_size[1], -1)       # [sk, b * np, hn]
        matmul_result = torch.empty(output_size[0] * output_size[1], output_size[2], output_size[3],
                                    dtype=query_layer.dtype)                                  # [b * np, sq, sk]
        if self.bug == "query-reshape-for-transpose":
            query_bmm = query_layer.reshape(output_size[0] * output_size[1], output_size[2], -1)  # [b * np, sq, hn]
        else:
            query_bmm = query_layer.transpose(0, 1)                                           # [b * np, sq, hn]
        matmul_result = torch.baddbmm(matmul_result, query_bmm,                               # [b * np, sq, hn]
                                      key_layer.transpose(0, 1).transpose(1, 2),              # [b * np, hn, sk]
                                      beta=0.0, alpha=(1.0 / self.norm_factor))
        attention_scores = matmul_result.view(*output_size)                                   # [b, np, sq, sk]

        # FusedScaleMaskSoftmax: scale by coeff in fp32, mask_func, softmax
        if self.bug != "layer-scaling-not-undone":
            attention_scores = attention_scores * self.layer_number
        attention_scores = attention_scores.masked_fill(attention_mask, torch.finfo(attention_scores.dtype).min)
        attention_probs = torch.nn.Softmax(dim=-1)(attention_scores)                          # [b, np, sq, sk]

        output_size = (value_layer.size(1), value_layer.size(2), query_layer.size(0), value_layer.size(3))
        value_layer = value_layer.view(value_layer.size(0), output_size[0] * output_size[1], -1)   # [sk, b * np, hn]
        attention_probs = attention_probs.view(output_size[0] * output_size[1], output_size[2], -1)  # [b * np, sq, sk]
        context_layer = torch.bmm(attention_probs, value_layer.transpose(0, 1))              # [b * np, sq, hn]
        return context_layer.view(*output_size)                                               # [b, np, sq, hn]

    def forward(self, hidden_states, attention_mask):
        # hidden_states: [sq, b, h]
        mixed_x_layer = self.query_key_value(hidden_states)                                   # [sq, b, np * 3 * hn]
        new_tensor_shape = mixed_x_layer.size()[:-1] + (
            self.num_attention_heads_per_partition, 3 * self.hidden_size_per_attention_head)
        mixed_x_layer = mixed_x_layer.view(*new_tensor_shape)                                 # [sq, b, np, 3 * hn]
        query_layer, key_layer, value_layer = torch.chunk(mixed_x_layer, 3, dim=-1)           # 3 [sq, b, np, hn]

        query_rot, query_pass = query_layer[..., : self.rotary_ndims], query_layer[..., self.rotary_ndims:]
        key_rot, key_pass = key_layer[..., : self.rotary_ndims], key_layer[..., self.rotary_ndims:]
        seq_len = key_layer.shape[0]
        cos, sin = self.rotary_emb(value_layer, seq_len=seq_len)
        query_layer, key_layer = apply_rotary_pos_emb(query_rot, key_rot, cos, sin, offset=0)
        query_layer = torch.cat((query_layer, query_pass), dim=-1)                            # [sq, b, np, hn]
        if self.bug == "key-rot-unrotated":
            key_layer = torch.cat((key_rot, key_pass), dim=-1)                                # [sk, b, np, hn]
        else:
            key_layer = torch.cat((key_layer, key_pass), dim=-1)                              # [sk, b, np, hn]

        context_layer = self.attention(query_layer, key_layer, value_layer, attention_mask)   # [b, np, sq, hn]
        context_layer = context_layer.permute(2, 0, 1, 3).contiguous()                        # [sq, b, np, hn]
        new_context_layer_shape = context_layer.size()[:-2] + (self.hidden_size_per_partition,)
        context_layer = context_layer.view(*new_context_layer_shape)                          # [sq, b, hp]
        return self.dense(context_layer)                                                      # [sq, b, h]


def get_ltor_mask(seq_length):
    mask = torch.tril(torch.ones((1, seq_length, seq_length))).view(1, 1, seq_length, seq_length)
    return mask < 0.5                                                                         # True = hidden


BUGS = ("key-rot-unrotated", "query-reshape-for-transpose", "layer-scaling-not-undone")
TWINS = ()
DIMS = ("B=2 T=5 D=64 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=64 H=4"}


def build(bug="", B=2, T=5, D=64, H=4):
    torch.manual_seed(0)
    hidden_states = torch.randn(T, B, D)                                                      # [sq, b, h]
    return ParallelSelfAttention(D, H, bug=bug).eval(), (hidden_states, get_ltor_mask(T))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
