"""huggingface/transformers, src/transformers/models/luke/modeling_luke.py (``LukeSelfAttention`` with
``use_entity_aware_attention``, and the mask of ``LukeModel.get_extended_attention_mask``; 2021-2024): words
``[b, T, D]`` and entities ``[b, S, D]`` concatenated along the tokens for the keys and values; four query
projections, ``query`` (word to word), ``w2e_query``, ``e2w_query``, ``e2e_query``, each ``transpose_for_scores``
(``view(size[:-1] + (heads, head_size)).permute(0, 2, 1, 3)``); the keys sliced ``key_layer[:, :, :word_size, :]``
and ``key_layer[:, :, word_size:, :]``; four score blocks, ``cat([w2w, w2e], dim=3)``, ``cat([e2w, e2e], dim=3)``,
then ``cat([word, entity], dim=2)``; scaled; the padding mask ``cat([attention_mask, entity_attention_mask],
dim=-1)`` extended ``[:, None, None, :]`` to ``(1 - mask) * finfo.min`` and added; softmax; ``matmul`` with the
values, ``permute(0, 2, 1, 3)``, ``view(size[:-2] + (all_head_size,))``; outputs split back at ``word_size``.

Bugs: ``mask-on-queries``: the mask extended ``[:, None, :, None]`` (it hides the padded tokens' own rows, not the
keys: every real token still attends the padding); ``mask-concat-entities-first``: ``cat([entity_attention_mask,
attention_mask], dim=-1)`` while the hidden states go words first (the mask's key order not the keys' order: the
masked positions fall on real words)."""

import math
import sys

import torch
from torch import nn


class LukeSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, bug=""):
        super().__init__()
        self.num_attention_heads, self.bug = num_attention_heads, bug
        self.attention_head_size = hidden_size // num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)
        self.w2e_query = nn.Linear(hidden_size, self.all_head_size)
        self.e2w_query = nn.Linear(hidden_size, self.all_head_size)
        self.e2e_query = nn.Linear(hidden_size, self.all_head_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(*new_x_shape)                                                     # (b, n, h, d)
        return x.permute(0, 2, 1, 3)                                                 # (b, h, n, d)

    def extended_mask(self, attention_mask, entity_attention_mask, dtype):
        if self.bug == "mask-concat-entities-first":
            attention_mask = torch.cat([entity_attention_mask, attention_mask], dim=-1)   # (b, S + T)
        else:
            attention_mask = torch.cat([attention_mask, entity_attention_mask], dim=-1)   # (b, T + S)
        if self.bug == "mask-on-queries":
            extended = attention_mask[:, None, :, None]                              # (b, 1, T + S, 1)
        else:
            extended = attention_mask[:, None, None, :]                              # (b, 1, 1, T + S)
        return (1.0 - extended.to(dtype)) * torch.finfo(dtype).min

    def forward(self, word_hidden_states, entity_hidden_states, attention_mask, entity_attention_mask):
        word_size = word_hidden_states.size(1)
        concat_hidden_states = torch.cat([word_hidden_states, entity_hidden_states], dim=1)   # (b, T + S, D)
        key_layer = self.transpose_for_scores(self.key(concat_hidden_states))        # (b, h, T + S, d)
        value_layer = self.transpose_for_scores(self.value(concat_hidden_states))

        w2w_query_layer = self.transpose_for_scores(self.query(word_hidden_states))  # (b, h, T, d)
        w2e_query_layer = self.transpose_for_scores(self.w2e_query(word_hidden_states))
        e2w_query_layer = self.transpose_for_scores(self.e2w_query(entity_hidden_states))   # (b, h, S, d)
        e2e_query_layer = self.transpose_for_scores(self.e2e_query(entity_hidden_states))

        w2w_key_layer = key_layer[:, :, :word_size, :]                               # (b, h, T, d)
        e2w_key_layer = key_layer[:, :, :word_size, :]
        w2e_key_layer = key_layer[:, :, word_size:, :]                               # (b, h, S, d)
        e2e_key_layer = key_layer[:, :, word_size:, :]

        w2w_attention_scores = torch.matmul(w2w_query_layer, w2w_key_layer.transpose(-1, -2))   # (b, h, T, T)
        w2e_attention_scores = torch.matmul(w2e_query_layer, w2e_key_layer.transpose(-1, -2))   # (b, h, T, S)
        e2w_attention_scores = torch.matmul(e2w_query_layer, e2w_key_layer.transpose(-1, -2))   # (b, h, S, T)
        e2e_attention_scores = torch.matmul(e2e_query_layer, e2e_key_layer.transpose(-1, -2))   # (b, h, S, S)

        word_attention_scores = torch.cat([w2w_attention_scores, w2e_attention_scores], dim=3)      # (b, h, T, T + S)
        entity_attention_scores = torch.cat([e2w_attention_scores, e2e_attention_scores], dim=3)    # (b, h, S, T + S)
        attention_scores = torch.cat([word_attention_scores, entity_attention_scores], dim=2)       # (b, h, T+S, T+S)

        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + self.extended_mask(attention_mask, entity_attention_mask,
                                                                 attention_scores.dtype)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)                   # (b, h, T + S, d)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()               # (b, T + S, h, d)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(*new_context_layer_shape)                 # (b, T + S, D)
        return context_layer[:, :word_size, :], context_layer[:, word_size:, :]


BUGS = ("mask-on-queries", "mask-concat-entities-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=3",)


def build(bug="", B=2, T=6, D=32, H=4, S=3):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, T - 2:] = 0                                                   # the later texts padded
    entity_attention_mask = torch.ones(B, S, dtype=torch.long)
    entity_attention_mask[:1, S - 1:] = 0                                            # the first one's last entity
    inputs = (torch.randn(B, T, D), torch.randn(B, S, D), attention_mask, entity_attention_mask)
    return LukeSelfAttention(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
