"""huggingface/transformers, src/transformers/models/mbart/modeling_mbart.py (v4.46,
``MBartLearnedPositionalEmbedding``, ``MBartAttention``, ``MBartDecoderLayer``, ``MBartDecoder``): the learnt
positions with their offset of 2
(``positions = arange(past, past + T) + self.offset``, a table of ``max_positions + 2`` rows), the token embeddings
scaled by ``sqrt(D)``, the decoder's pre-LayerNorm self-attention: ``q_proj(x) * scaling``, ``_shape`` (``view(B, T,
H, d).transpose(1, 2)``), the heads folded into the batch (``view(B * H, T, d)``), ``bmm(q, k.transpose(1, 2))``, the
causal mask ``(B, 1, T, T)`` added through ``view(B, H, T, T)``, ``softmax(dim=-1)``, ``bmm`` with v, ``view(B, H, T,
d).transpose(1, 2).reshape(B, T, D)``, ``out_proj``.

Bugs: ``causal-mask-upper``: the causal mask built with ``tril`` where ``triu(diagonal=1)`` of ``finfo.min`` is meant
(each token attends only to later tokens: the natural slip of a hand-written ``_make_causal_mask``);
``merge-heads-no-transpose``: ``attn_output.view(B, H, T, d).reshape(B, T, D)`` without the ``transpose(1, 2)`` (the
natural slip of ports of ``_shape`` that forget the inverse transpose before the merge)."""

import sys

import torch
from torch import nn


class MBartLearnedPositionalEmbedding(nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim):
        self.offset = 2                                   # MBart keeps 2 rows before the first position
        super().__init__(num_embeddings + self.offset, embedding_dim)

    def forward(self, input_ids, past_key_values_length=0):
        bsz, seq_len = input_ids.shape[:2]
        positions = torch.arange(past_key_values_length, past_key_values_length + seq_len, dtype=torch.long)
        positions = positions.expand(bsz, -1)
        return super().forward(positions + self.offset)


class MBartAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.reshape(*proj_shape)
        value_states = value_states.reshape(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)
        if self.bug != "merge-heads-no-transpose":
            attn_output = attn_output.transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


class MBartDecoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn = MBartAttention(dim, heads, bug)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


class MBartDecoder(nn.Module):
    def __init__(self, dim, heads, bug="", vocab=60, max_positions=32):
        super().__init__()
        self.bug = bug
        self.embed_scale = dim ** 0.5
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=1)
        self.embed_positions = MBartLearnedPositionalEmbedding(max_positions, dim)
        self.layernorm_embedding = nn.LayerNorm(dim)
        self.layer = MBartDecoderLayer(dim, heads, bug)
        self.layer_norm = nn.LayerNorm(dim)

    def _make_causal_mask(self, bsz, tgt_len, dtype):
        full = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
        if self.bug == "causal-mask-upper":
            mask = torch.tril(full, diagonal=-1)
        else:
            mask = torch.triu(full, diagonal=1)
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)

    def forward(self, input_ids):                                        # (B, T)
        inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale
        hidden_states = inputs_embeds + self.embed_positions(input_ids)
        hidden_states = self.layernorm_embedding(hidden_states)
        mask = self._make_causal_mask(*input_ids.shape, hidden_states.dtype)
        hidden_states = self.layer(hidden_states, mask)
        return self.layer_norm(hidden_states)


BUGS = ("causal-mask-upper", "merge-heads-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(3, 60, (B, T))
    return MBartDecoder(D, H, bug, max_positions=T + 4).eval(), (input_ids,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
