"""huggingface/transformers, src/transformers/models/bert/modeling_bert.py (``BertSelfAttention`` with
``position_embedding_type="relative_key_query"``, Huang et al. 2020;
https://github.com/huggingface/transformers/blob/v4.40.0/src/transformers/models/bert/modeling_bert.py):
``transpose_for_scores`` (``view(new_x_shape).permute(0, 2, 1, 3)``), the distance table
``position_ids_l = torch.arange(query_length).view(-1, 1)``, ``position_ids_r =
torch.arange(key_length).view(1, -1)``, ``distance = position_ids_l - position_ids_r``,
``self.distance_embedding(distance + self.max_position_embeddings - 1)`` (``nn.Embedding(2 * max - 1,
head_size)``), ``einsum("bhld,lrd->bhlr", query_layer, positional_embedding)`` and
``einsum("bhrd,lrd->bhlr", key_layer, positional_embedding)`` added to the scores; the extended padding
mask ``(1.0 - mask[:, None, None, :]) * torch.finfo(dtype).min``; softmax, ``permute(0, 2, 1, 3)`` and
``view(new_context_layer_shape)``.

Bugs (argument): ``key-term-query-index``: the key term copied from the query term,
``einsum("bhld,lrd->bhlr", key_layer, positional_embedding)`` (each row reads the key at the query's own
position); ``positions-from-batch``: ``query_length, key_length = hidden_states.shape[0], ...`` (the
positions counted from the batch axis of batch-first input: raises unless B = T, or B = 1, where the
one-row table broadcasts over every query); ``mask-on-queries``: the padding mask extended
``mask[:, None, :, None]`` (hides padded queries' rows instead of padded keys)."""

import math
import sys

import torch
from torch import nn

BUGS = ("key-term-query-index", "positions-from-batch", "mask-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden_size=32, num_attention_heads=4, max_position_embeddings=16, bug=""):
        super().__init__()
        self.bug = bug
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = hidden_size // num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)
        self.max_position_embeddings = max_position_embeddings
        self.distance_embedding = nn.Embedding(2 * max_position_embeddings - 1, self.attention_head_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)  # (B, T, H, d)
        return x.permute(0, 2, 1, 3)  # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))  # (B, H, T, T)
        query_length, key_length = query_layer.shape[2], key_layer.shape[2]
        if self.bug == "positions-from-batch":
            query_length, key_length = hidden_states.shape[0], hidden_states.shape[0]  # bug: the batch
        position_ids_l = torch.arange(query_length, dtype=torch.long).view(-1, 1)
        position_ids_r = torch.arange(key_length, dtype=torch.long).view(1, -1)
        distance = position_ids_l - position_ids_r  # (T, T)
        positional_embedding = self.distance_embedding(distance + self.max_position_embeddings - 1)  # (T, T, d)
        positional_embedding = positional_embedding.to(dtype=query_layer.dtype)  # fp16 compatibility
        relative_position_scores_query = torch.einsum("bhld,lrd->bhlr", query_layer, positional_embedding)
        if self.bug == "key-term-query-index":
            relative_position_scores_key = torch.einsum("bhld,lrd->bhlr", key_layer, positional_embedding)
        else:
            relative_position_scores_key = torch.einsum("bhrd,lrd->bhlr", key_layer, positional_embedding)
        attention_scores = attention_scores + relative_position_scores_query + relative_position_scores_key
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)  # (B, H, T, d)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()  # (B, T, H, d)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)  # (B, T, D)


class BertLayer(nn.Module):
    def __init__(self, hidden_size=32, num_attention_heads=4, bug=""):
        super().__init__()
        self.bug = bug
        self.attention = BertSelfAttention(hidden_size, num_attention_heads, bug=bug)

    def forward(self, hidden_states, mask):
        dtype = hidden_states.dtype
        if self.bug == "mask-on-queries":
            extended = mask[:, None, :, None].to(dtype)  # bug: (B, 1, T, 1)
        else:
            extended = mask[:, None, None, :].to(dtype)  # (B, 1, 1, T)
        extended = (1.0 - extended) * torch.finfo(dtype).min
        return self.attention(hidden_states, extended)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4': hidden states (B, T, D) and a padding mask (B, T), the last entry's
    last two tokens padding (at B = 1 nothing is padded)."""
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    if B > 1:
        mask[-1, -2:] = 0
    return BertLayer(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
