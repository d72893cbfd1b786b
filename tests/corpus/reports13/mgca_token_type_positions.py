"""HKU-MedAI/MGCA issue #13 ("positional embedding", acknowledged by the author: "Yes. It might be more
reasonable to use relative positional ids"): MGCA's ``BertEncoder.forward`` called its BERT with the
``token_type_ids`` where the ``position_ids`` go, so every token of a report read the position embedding of
position 0 (the token types of a single-segment report are all zero: "you used token_type_ids as
position_ids, but the token_type_ids is an all zero tensor"); the encoder lost the word order. The fix passes
``arange`` positions (BERT's default).

The idiom: transformers' ``BertEmbeddings`` (``word_embeddings + position_embeddings(position_ids) +
token_type_embeddings(token_type_ids)``, ``LayerNorm``) and one ``BertSelfAttention`` layer (``query``/``key``/
``value`` linears, ``transpose_for_scores`` as ``view(B, T, H, d).permute(0, 2, 1, 3)``, scores ``/ sqrt(d)``
plus the extended padding mask ``(1 - mask[:, None, None, :]) * min``, ``softmax(dim=-1)``), right padding.

Bug (argument): ``token-type-as-positions``: ``position_ids=token_type_ids``."""

import math
import sys

import torch
from torch import nn

BUGS = ("token-type-as-positions",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, max_positions=16, type_vocab=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_positions).expand((1, -1)))

    def forward(self, input_ids, token_type_ids, position_ids=None):
        seq_length = input_ids.size(1)
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)                # [positions]
        return self.LayerNorm(embeddings)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = heads, hidden // heads
        self.all_head_size = hidden
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, extended_attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size) + extended_attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class BertEncoder(nn.Module):
    def __init__(self, vocab, hidden, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.embeddings = BertEmbeddings(vocab, hidden)
        self.attention = BertSelfAttention(hidden, heads)
        self.output = nn.Linear(hidden, hidden)

    def forward(self, ids, attn_mask, token_type):                                      # (B, T) each
        if self.bug == "token-type-as-positions":
            x = self.embeddings(ids, token_type, position_ids=token_type)              # [embed]
        else:
            x = self.embeddings(ids, token_type)                                        # [embed]
        extended = (1.0 - attn_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        return x + self.output(self.attention(x, extended))                            # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    ids = torch.randint(1, 50, (B, T))
    attn_mask = torch.ones(B, T, dtype=torch.long)
    attn_mask[1:, T - 2:] = 0                                                          # right padding
    ids = ids * attn_mask
    return BertEncoder(50, D, H, bug).eval(), (ids, attn_mask, torch.zeros(B, T, dtype=torch.long))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
