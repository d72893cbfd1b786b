"""huggingface/transformers, src/transformers/models/longformer/modeling_longformer.py (v4.40,
``LongformerSelfAttention``: ``_chunk``, ``_pad_and_transpose_last_two_dims``, ``_pad_and_diagonalize``,
``_mask_invalid_locations``, ``_sliding_chunks_query_key_matmul``, ``_sliding_chunks_matmul_attn_probs_value``):
the hidden states ``(T, B, D)`` (``hidden_states.transpose(0, 1)``), q scaled by ``1 / sqrt(head_dim)``, each of
q, k, v viewed ``(T, B, H, d).transpose(0, 1)``; the scores over a band of ``2w + 1`` keys: q and k folded
``(B*H, T, d)`` and cut into overlapping chunks of ``2w`` by ``as_strided`` (the chunk stride halved), the
chunked product ``einsum("bcxd,bcyd->bcxy")``, padded and viewed with the last two axes exchanged, copied into a
``(B*H, chunks + 1, w, 2w + 1)`` band (the four diagonal-to-band slice assignments), viewed ``(B, H, T, 2w +
1).transpose(2, 1)``; the corners beyond the sequence set to ``-inf`` (``_mask_invalid_locations``); softmax over
the band; the values padded by ``w`` on both sides and chunked ``(B*H, chunks + 1, 3w, d)`` by ``as_strided``, the
probabilities ``_pad_and_diagonalize``d, ``einsum("bcwd,bcdh->bcwh")``, viewed ``(B, H, T, d).transpose(1, 2)``;
back ``(T, B, D)`` and the output projection (here, as in ``LongformerSelfOutput``, ``dense``). No global
tokens and no padding mask (``is_global_attn`` false): the local band alone.

Bugs (argument): ``context-not-transposed``: ``_sliding_chunks_matmul_attn_probs_value`` returning
``context.view(B, H, T, d)`` without the ``transpose(1, 2)`` (the caller then reads heads as tokens);
``band-softmax-over-tokens``: ``softmax(attn_scores, dim=1)`` on the ``(B, T, H, 2w + 1)`` band (the dim of the
``(B, H, T, T)`` layout the author had in mind: normalised over the queries)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def _chunk(hidden_states, window_overlap):                                        # (B*H, T, d)
    hidden_states = hidden_states.view(hidden_states.size(0), hidden_states.size(1) // (window_overlap * 2),
                                       window_overlap * 2, hidden_states.size(2))
    chunk_size = list(hidden_states.size())
    chunk_size[1] = chunk_size[1] * 2 - 1
    chunk_stride = list(hidden_states.stride())
    chunk_stride[1] = chunk_stride[1] // 2
    return hidden_states.as_strided(size=chunk_size, stride=chunk_stride)         # (B*H, chunks, 2w, d)


def _pad_and_transpose_last_two_dims(hidden_states_padded, padding):
    hidden_states_padded = F.pad(hidden_states_padded, padding)
    return hidden_states_padded.view(*hidden_states_padded.size()[:-2], hidden_states_padded.size(-1),
                                     hidden_states_padded.size(-2))


def _pad_and_diagonalize(chunked_hidden_states):                                  # (B*H, c, w, 2w+1)
    total_num_heads, num_chunks, window_overlap, hidden_dim = chunked_hidden_states.size()
    chunked_hidden_states = F.pad(chunked_hidden_states, (0, window_overlap + 1))
    chunked_hidden_states = chunked_hidden_states.view(total_num_heads, num_chunks, -1)
    chunked_hidden_states = chunked_hidden_states[:, :, :-window_overlap]
    chunked_hidden_states = chunked_hidden_states.view(total_num_heads, num_chunks, window_overlap,
                                                       window_overlap + hidden_dim)
    return chunked_hidden_states[:, :, :, :-1]                                     # (B*H, c, w, 3w)


def _mask_invalid_locations(input_tensor, affected_seq_len):                      # (B, T, H, 2w+1)
    beginning_mask_2d = input_tensor.new_ones(affected_seq_len, affected_seq_len + 1).tril().flip(dims=[0])
    beginning_mask = beginning_mask_2d[None, :, None, :]
    ending_mask = beginning_mask.flip(dims=(1, 3))
    beginning_input = input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1]
    beginning_mask = beginning_mask.expand(beginning_input.size())
    input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1] = torch.full_like(
        beginning_input, -float("inf")).where(beginning_mask.bool(), beginning_input)
    ending_input = input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1):]
    ending_mask = ending_mask.expand(ending_input.size())
    input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1):] = torch.full_like(
        ending_input, -float("inf")).where(ending_mask.bool(), ending_input)


class LongformerSelfAttention(nn.Module):
    def __init__(self, dim, heads, one_sided_attn_window_size=2, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.embed_dim, self.bug = heads, dim // heads, dim, bug
        self.one_sided_attn_window_size = one_sided_attn_window_size
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.dense = nn.Linear(dim, dim)

    def _sliding_chunks_query_key_matmul(self, query, key, window_overlap):       # (B, T, H, d)
        batch_size, seq_len, num_heads, head_dim = query.size()
        chunks_count = seq_len // window_overlap - 1
        query = query.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        key = key.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        query, key = _chunk(query, window_overlap), _chunk(key, window_overlap)
        diagonal_chunked_attention_scores = torch.einsum("bcxd,bcyd->bcxy", (query, key))
        diagonal_chunked_attention_scores = _pad_and_transpose_last_two_dims(diagonal_chunked_attention_scores,
                                                                             padding=(0, 0, 0, 1))
        diagonal_attention_scores = diagonal_chunked_attention_scores.new_zeros(
            (batch_size * num_heads, chunks_count + 1, window_overlap, window_overlap * 2 + 1))
        w = window_overlap
        diagonal_attention_scores[:, :-1, :, w:] = diagonal_chunked_attention_scores[:, :, :w, : w + 1]
        diagonal_attention_scores[:, -1, :, w:] = diagonal_chunked_attention_scores[:, -1, w:, : w + 1]
        diagonal_attention_scores[:, 1:, :, :w] = diagonal_chunked_attention_scores[:, :, -(w + 1): -1, w + 1:]
        diagonal_attention_scores[:, 0, 1:w, 1:w] = diagonal_chunked_attention_scores[:, 0, : w - 1, 1 - w:]
        diagonal_attention_scores = diagonal_attention_scores.view(batch_size, num_heads, seq_len,
                                                                   2 * w + 1).transpose(2, 1)
        _mask_invalid_locations(diagonal_attention_scores, w)
        return diagonal_attention_scores                                           # (B, T, H, 2w+1)

    def _sliding_chunks_matmul_attn_probs_value(self, attn_probs, value, window_overlap):
        batch_size, seq_len, num_heads, head_dim = value.size()
        chunks_count = seq_len // window_overlap - 1
        chunked_attn_probs = attn_probs.transpose(1, 2).reshape(batch_size * num_heads, seq_len // window_overlap,
                                                                window_overlap, 2 * window_overlap + 1)
        value = value.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        padded_value = F.pad(value, (0, 0, window_overlap, window_overlap), value=-1)
        chunked_value_size = (batch_size * num_heads, chunks_count + 1, 3 * window_overlap, head_dim)
        chunked_value_stride = padded_value.stride()
        chunked_value_stride = (chunked_value_stride[0], window_overlap * chunked_value_stride[1],
                                chunked_value_stride[1], chunked_value_stride[2])
        chunked_value = padded_value.as_strided(size=chunked_value_size, stride=chunked_value_stride)
        chunked_attn_probs = _pad_and_diagonalize(chunked_attn_probs)
        context = torch.einsum("bcwd,bcdh->bcwh", (chunked_attn_probs, chunked_value))
        context = context.view(batch_size, num_heads, seq_len, head_dim)           # (B, H, T, d)
        return context if self.bug == "context-not-transposed" else context.transpose(1, 2)

    def forward(self, hidden_states):                                              # (B, T, D)
        hidden_states = hidden_states.transpose(0, 1)                              # (T, B, D)
        query_vectors, key_vectors = self.query(hidden_states), self.key(hidden_states)
        value_vectors = self.value(hidden_states)
        seq_len, batch_size, embed_dim = hidden_states.size()
        query_vectors /= math.sqrt(self.head_dim)
        query_vectors = query_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        key_vectors = key_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        value_vectors = value_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        attn_scores = self._sliding_chunks_query_key_matmul(query_vectors, key_vectors,
                                                            self.one_sided_attn_window_size)
        attn_probs = F.softmax(attn_scores, dim=1 if self.bug == "band-softmax-over-tokens" else -1,
                               dtype=torch.float32)                                # (B, T, H, 2w+1)
        attn_output = self._sliding_chunks_matmul_attn_probs_value(attn_probs, value_vectors,
                                                                   self.one_sided_attn_window_size)
        attn_output = attn_output.transpose(0, 1).reshape(seq_len, batch_size, embed_dim).contiguous()
        return self.dense(attn_output.transpose(0, 1))                             # (B, T, D)


BUGS = ("context-not-transposed", "band-softmax-over-tokens")
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)
EQUAL = {"B=2 T=8 D=32 H=4": "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return LongformerSelfAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
