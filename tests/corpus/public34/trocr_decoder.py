"""transformers, src/transformers/models/trocr/modeling_trocr.py (v4.46, ``TrOCRLearnedPositionalEmbedding``,
``TrOCRAttention``, ``TrOCRDecoderLayer``, ``TrOCRDecoder``; the causal mask of
``modeling_attn_mask_utils._make_causal_mask``): TrOCR's text decoder over a ViT encoder's patch states. Tokens
embedded and scaled by ``sqrt(D)``, learned positions with the offset 2, ``layernorm_embedding``; the causal mask
``full((T, T), finfo.min)`` zeroed where ``mask_cond < (mask_cond + 1).view(T, 1)``, ``[None, None]`` and
``expand``ed to ``(B, 1, T, T)``; ``TrOCRAttention``: the query scaled, ``_shape`` ``view(B, T, H,
d).transpose(1, 2)``, folded ``(B·H, T, d)``, ``bmm``, ``view(B, H, T, S) + mask``, ``softmax``, ``bmm``,
``view(B, H, T, d).transpose(1, 2).reshape(B, T, D)``; a self-attention, then a cross-attention whose key and
value come from the encoder states ``(B, S, D)`` (no mask: the image has no padding).

Bugs: ``causal-cond-strict``: the condition written ``mask_cond < mask_cond.view(T, 1)`` (the ``+ 1`` dropped:
the diagonal is masked too, so no token sees itself and the first row is all ``finfo.min``);
``shape-without-transpose``: ``_shape`` as ``view(B, H, T, d)`` (the slip of reading the projection's ``(B, T,
D)`` straight as heads-first)."""

import math
import sys

import torch
from torch import nn


class TrOCRAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        if self.bug == "shape-without-transpose":
            return tensor.view(bsz, self.num_heads, seq_len, self.head_dim).contiguous()
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, key_value_states=None, attention_mask=None):
        bsz, tgt_len, embed_dim = hidden_states.size()
        source = hidden_states if key_value_states is None else key_value_states
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(source), source.shape[1], bsz)
        value_states = self._shape(self.v_proj(source), source.shape[1], bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states, value_states = key_states.reshape(*proj_shape), value_states.reshape(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        if attention_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        return self.out_proj(attn_output.reshape(bsz, tgt_len, embed_dim))


class TrOCRDecoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn = TrOCRAttention(dim, heads, bug=bug)
        self.encoder_attn = TrOCRAttention(dim, heads, kdim=dim, vdim=dim, bug=bug)
        self.self_attn_layer_norm, self.encoder_attn_layer_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.fc1, self.fc2, self.final_layer_norm = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim), nn.LayerNorm(dim)

    def forward(self, hidden_states, attention_mask, encoder_hidden_states):
        hidden_states = self.self_attn_layer_norm(hidden_states + self.self_attn(hidden_states, None, attention_mask))
        cross = self.encoder_attn(hidden_states, encoder_hidden_states)
        hidden_states = self.encoder_attn_layer_norm(hidden_states + cross)
        ffn = self.fc2(nn.functional.gelu(self.fc1(hidden_states)))
        return self.final_layer_norm(hidden_states + ffn)


class TrOCRDecoder(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.bug, self.embed_scale = bug, math.sqrt(dim)
        self.embed_tokens, self.embed_positions = nn.Embedding(vocab, dim), nn.Embedding(32 + 2, dim)
        self.layernorm_embedding = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([TrOCRDecoderLayer(dim, heads, bug) for _ in range(2)])

    def causal_mask(self, bsz, tgt_len, dtype):
        mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min)
        mask_cond = torch.arange(mask.size(-1))
        if self.bug == "causal-cond-strict":
            mask.masked_fill_(mask_cond < mask_cond.view(mask.size(-1), 1), 0)
        else:
            mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
        return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)

    def forward(self, input_ids, encoder_hidden_states):
        bsz, seq_len = input_ids.shape
        positions = torch.arange(seq_len).expand(bsz, -1) + 2
        hidden_states = self.embed_tokens(input_ids) * self.embed_scale + self.embed_positions(positions)
        hidden_states = self.layernorm_embedding(hidden_states)
        attention_mask = self.causal_mask(bsz, seq_len, hidden_states.dtype)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask, encoder_hidden_states)
        return hidden_states


BUGS = ("causal-cond-strict", "shape-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)
EQUAL = {"B=2 T=6 S=5 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(0, 40, (B, T))
    encoder_hidden_states = torch.randn(B, S, D)                           # the ViT encoder's patch states
    return TrOCRDecoder(40, D, H, bug).eval(), (input_ids, encoder_hidden_states)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
