"""huggingface/transformers, src/transformers/models/roberta/modeling_roberta.py (v4.46, ``RobertaEmbeddings`` with
``create_position_ids_from_input_ids``, ``RobertaSelfAttention``, ``RobertaModel.get_extended_attention_mask``):
the position ids made from the padding mask, ``mask = input_ids.ne(padding_idx)``, ``cumsum(dim=1) * mask +
padding_idx`` (padding tokens keep ``padding_idx``, the others count from ``padding_idx + 1``); word, position and
token-type embeddings summed, LayerNorm; the padding mask widened to ``(B, 1, 1, T)`` and turned into an additive
bias ``(1 - mask) * finfo.min``; ``query``/``key``/``value`` linears, ``transpose_for_scores`` (``view(B, T, H,
d)``, ``permute(0, 2, 1, 3)``), ``matmul(q, k.transpose(-1, -2)) / sqrt(d)``, bias added, ``softmax(dim=-1)``,
``matmul`` with v, ``permute(0, 2, 1, 3).contiguous()``, ``view(B, T, D)``, the ``dense`` output.

Bugs: ``mask-on-queries``: the extended mask written ``attention_mask[:, None, :, None]`` (the padding bias set on
the query rows, not the key columns: the natural slip of hand-written extended masks, padded keys are still
read by every query); ``softmax-over-queries``: ``softmax(dim=-2)`` (the slip of ports that write the scores
``(B, H, T_k, T_q)`` in their head and normalise the wrong axis)."""

import sys

import torch
from torch import nn


def create_position_ids_from_input_ids(input_ids, padding_idx):
    mask = input_ids.ne(padding_idx).int()
    incremental_indices = torch.cumsum(mask, dim=1).type_as(mask) * mask
    return incremental_indices.long() + padding_idx


class RobertaEmbeddings(nn.Module):
    def __init__(self, vocab, dim, max_positions, padding_idx=1):
        super().__init__()
        self.padding_idx = padding_idx
        self.word_embeddings = nn.Embedding(vocab, dim, padding_idx=padding_idx)
        self.position_embeddings = nn.Embedding(max_positions, dim, padding_idx=padding_idx)
        self.token_type_embeddings = nn.Embedding(1, dim)
        self.LayerNorm = nn.LayerNorm(dim)

    def forward(self, input_ids):
        position_ids = create_position_ids_from_input_ids(input_ids, self.padding_idx)
        token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.LayerNorm(embeddings)


class RobertaSelfAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.num_attention_heads, self.attention_head_size, self.bug = heads, dim // heads, bug
        self.all_head_size = dim
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.dense = nn.Linear(dim, dim)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / self.attention_head_size ** 0.5
        attention_scores = attention_scores + attention_mask
        dim = -2 if self.bug == "softmax-over-queries" else -1
        attention_probs = nn.functional.softmax(attention_scores, dim=dim)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))
        return self.dense(context_layer)


class RobertaModel(nn.Module):
    def __init__(self, dim, heads, bug="", vocab=50, max_positions=40, padding_idx=1):
        super().__init__()
        self.bug, self.padding_idx = bug, padding_idx
        self.embeddings = RobertaEmbeddings(vocab, dim, max_positions, padding_idx)
        self.attention = RobertaSelfAttention(dim, heads, bug)

    def get_extended_attention_mask(self, attention_mask, dtype):
        if self.bug == "mask-on-queries":
            extended = attention_mask[:, None, :, None]
        else:
            extended = attention_mask[:, None, None, :]
        extended = extended.to(dtype)
        return (1.0 - extended) * torch.finfo(dtype).min

    def forward(self, input_ids):                                                   # (B, T)
        attention_mask = input_ids.ne(self.padding_idx).long()
        hidden_states = self.embeddings(input_ids)
        extended = self.get_extended_attention_mask(attention_mask, hidden_states.dtype)
        return hidden_states + self.attention(hidden_states, extended)


BUGS = ("mask-on-queries", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(3, 50, (B, T))
    input_ids[1, T - 2:] = 1                                                        # the second row right-padded
    return RobertaModel(D, H, bug, max_positions=T + 4).eval(), (input_ids,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
