"""transformers, src/transformers/models/biogpt/modeling_biogpt.py (v4.46, ``BioGptLearnedPositionalEmbedding``,
``BioGptAttention``, ``BioGptDecoderLayer``): microsoft's biomedical GPT. Token embeddings scaled by ``sqrt(D)``,
learned positions whose ids come from ``cumsum`` of the attention mask (offset 2, padding ids at 1), then a
BART-style attention: ``q_proj(x) * scaling``, ``_shape``: ``view(B, T, H, d).transpose(1, 2)``, folded to
``(B H, T, d)``, ``bmm(q, k.transpose(1, 2))``, ``view(B, H, T, T)`` plus a causal mask joined to the padding mask
``mask[:, None, None, :]``, ``softmax(dim=-1)``, ``bmm`` with v, ``transpose(1, 2).reshape(B, T, D)``,
``out_proj``; a pre-norm GELU FFN.

Bugs: ``scores-not-transposed-back``: the output ``view(B, H, T, d)`` then ``reshape(B, T, D)`` without the
``transpose(1, 2)`` (a natural slip, the merge of the heads that BART-family ports get wrong);
``softmax-over-queries``: ``softmax(dim=1)`` on the ``(B H, T, T)`` weights (the reported slip in hand-rolled
``bmm`` attention, normalising over the queries)."""

import math
import sys

import torch
from torch import nn


class BioGptLearnedPositionalEmbedding(nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim):
        self.offset = 2
        super().__init__(num_embeddings + self.offset, embedding_dim)

    def forward(self, attention_mask):
        attention_mask = attention_mask.long()
        positions = (torch.cumsum(attention_mask, dim=1).type_as(attention_mask) * attention_mask).long() - 1
        return super().forward(positions + self.offset)


class BioGptAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(self.q_proj(hidden_states) * self.scaling, tgt_len, bsz).view(*proj_shape)
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz).view(*proj_shape)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz).view(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=1 if self.bug == "softmax-over-queries" else -1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)
        if self.bug != "scores-not-transposed-back":
            attn_output = attn_output.transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.num_heads * self.head_dim)
        return self.out_proj(attn_output)


class BioGptModel(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.embed_scale = math.sqrt(dim)
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=1)
        self.embed_positions = BioGptLearnedPositionalEmbedding(64, dim)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.self_attn = BioGptAttention(dim, heads, bug)
        self.final_layer_norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, input_ids, attention_mask):
        bsz, seq_len = input_ids.shape
        dtype = torch.float32
        hidden_states = self.embed_tokens(input_ids) * self.embed_scale + self.embed_positions(attention_mask)
        causal = torch.full((seq_len, seq_len), torch.finfo(dtype).min).triu(1)[None, None]
        padding = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        mask = (causal + padding).clamp(min=torch.finfo(dtype).min)
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.self_attn_layer_norm(hidden_states), mask)
        residual = hidden_states
        hidden_states = self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return self.layer_norm(residual + hidden_states)


BUGS = ("scores-not-transposed-back", "softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(2, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, -2:] = 0                                               # series 0 right-padded
    input_ids[0, -2:] = 1
    return BioGptModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
