"""huggingface/transformers, src/transformers/models/deprecated/nezha/modeling_nezha.py (v4.40,
``NezhaRelativePositionsEncoding``, ``NezhaSelfAttention``): NEZHA's functional relative positions. A fixed
sinusoidal table over clipped distances ``range_mat - range_matᵀ`` is built once (one-hot ``matmul`` with the
table, ``(L, L, d)`` for the longest sequence) and sliced ``[:T, :T, :]``; the key-side term permutes q to ``(T, B,
H, d)``, ``view(T, B·H, d)``, ``matmul`` with the table ``permute(0, 2, 1)``, ``view(T, B, H, T).permute(1, 2, 0,
3)`` and is added to ``q kᵀ``; the value-side term does the same with the probabilities and the table, added to
the context; ``/ sqrt(d)``, the extended padding mask, ``softmax(-1)``, ``permute(0, 2, 1, 3).view(B, T, D)``.

Bugs: ``probs-view-without-permute``: the probabilities ``contiguous().view(T, B·H, T)`` straight from ``(B, H, T,
T)`` (the ``permute(2, 0, 1, 3)`` dropped: batch, heads and queries mixed); ``key-term-permute-1230``: the key-side
term restored with ``permute(1, 2, 3, 0)`` (queries and keys exchanged, a natural slip for the ``(1, 2, 0, 3)``:
shapes agree in self-attention)."""

import math
import sys

import torch
from torch import nn


class NezhaRelativePositionsEncoding(nn.Module):
    def __init__(self, length, depth, max_relative_position=127):
        super().__init__()
        vocab_size = max_relative_position * 2 + 1
        range_vec = torch.arange(length)
        range_mat = range_vec.repeat(length).view(length, length)
        distance_mat = range_mat - torch.t(range_mat)
        distance_mat_clipped = torch.clamp(distance_mat, -max_relative_position, max_relative_position)
        final_mat = distance_mat_clipped + max_relative_position
        embeddings_table = torch.zeros(vocab_size, depth)
        position = torch.arange(0, vocab_size, dtype=torch.int64).float().unsqueeze(1)
        div_term = torch.exp(torch.arange(0, depth, 2).float() * (-math.log(10000.0) / depth))
        embeddings_table[:, 0::2] = torch.sin(position * div_term)
        embeddings_table[:, 1::2] = torch.cos(position * div_term)
        one_hot = nn.functional.one_hot(final_mat.view(-1), num_classes=vocab_size).float()
        positions_encoding = torch.matmul(one_hot, embeddings_table).view(length, length, depth)
        self.register_buffer("positions_encoding", positions_encoding, persistent=False)

    def forward(self, length):
        return self.positions_encoding[:length, :length, :]


class NezhaSelfAttention(nn.Module):
    def __init__(self, hidden_size, heads, max_position_embeddings=16, bug=""):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, hidden_size // heads
        self.all_head_size = hidden_size
        self.query, self.key = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.relative_positions_encoding = NezhaRelativePositionsEncoding(
            length=max_position_embeddings, depth=self.attention_head_size, max_relative_position=8)
        self.bug = bug

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        batch_size, num_attention_heads, from_seq_length, to_seq_length = attention_scores.size()
        relations_keys = self.relative_positions_encoding(to_seq_length)
        query_layer_t = query_layer.permute(2, 0, 1, 3)
        query_layer_r = query_layer_t.contiguous().view(
            from_seq_length, batch_size * num_attention_heads, self.attention_head_size)
        key_position_scores = torch.matmul(query_layer_r, relations_keys.permute(0, 2, 1))
        key_position_scores_r = key_position_scores.view(
            from_seq_length, batch_size, num_attention_heads, from_seq_length)
        if self.bug == "key-term-permute-1230":
            key_position_scores_r_t = key_position_scores_r.permute(1, 2, 3, 0)
        else:
            key_position_scores_r_t = key_position_scores_r.permute(1, 2, 0, 3)
        attention_scores = attention_scores + key_position_scores_r_t
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        relations_values = self.relative_positions_encoding(to_seq_length)
        if self.bug == "probs-view-without-permute":
            attention_probs_t = attention_probs
        else:
            attention_probs_t = attention_probs.permute(2, 0, 1, 3)
        attentions_probs_r = attention_probs_t.contiguous().view(
            from_seq_length, batch_size * num_attention_heads, to_seq_length)
        value_position_scores = torch.matmul(attentions_probs_r, relations_values)
        value_position_scores_r = value_position_scores.view(
            from_seq_length, batch_size, num_attention_heads, self.attention_head_size)
        context_layer = context_layer + value_position_scores_r.permute(1, 2, 0, 3)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class NezhaLayer(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.attention, self.dense = NezhaSelfAttention(D, H, bug=bug), nn.Linear(D, D)
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.intermediate, self.output = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, hidden_states, attention_mask):
        hidden_states = self.norm1(self.dense(self.attention(hidden_states, attention_mask)) + hidden_states)
        ffn = self.output(nn.functional.gelu(self.intermediate(hidden_states)))
        return self.norm2(ffn + hidden_states)


class NezhaModel(nn.Module):
    def __init__(self, vocab, D, H, bug=""):
        super().__init__()
        self.word_embeddings, self.token_type_embeddings = nn.Embedding(vocab, D), nn.Embedding(2, D)
        self.embeddings_norm = nn.LayerNorm(D)
        self.layer = nn.ModuleList([NezhaLayer(D, H, bug) for _ in range(2)])

    def forward(self, input_ids, attention_mask):
        token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        hidden_states = self.embeddings_norm(embeddings)
        extended = attention_mask[:, None, None, :].to(hidden_states.dtype)
        extended = (1.0 - extended) * torch.finfo(hidden_states.dtype).min
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended)
        return hidden_states


BUGS = ("probs-view-without-permute", "key-term-permute-1230")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -2:] = 0                                               # entry 1 right-padded
    return NezhaModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
