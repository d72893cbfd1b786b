"""transformers, src/transformers/models/xglm/modeling_xglm.py (v4.46, ``XGLMSinusoidalPositionalEmbedding``,
``XGLMAttention``, ``_prepare_4d_causal_attention_mask``): facebook's multilingual GPT. Token embeddings scaled by
``sqrt(D)``, sinusoidal positions from ``padding_idx + 1`` (a fixed table indexed by position ids), then a
BART-style attention: ``q_proj(x) * scaling``, ``_shape``: ``view(B, T, H, d).transpose(1, 2)``, folded to
``(B H, T, d)``, ``bmm(q, k.transpose(1, 2))``, ``view(B, H, T, T)`` plus a 4-D mask (a causal mask joined with
the padding mask expanded along the keys), ``softmax(dim=-1)``, ``bmm`` with v, ``view(B, H, T, d).transpose(1,
2).reshape(B, T, D)``, ``out_proj``.

Bugs: ``padding-on-queries``: the padding mask expanded ``mask[:, None, :, None]`` (along the queries) where
``mask[:, None, None, :]`` is meant (a natural slip in hand-written 4-D masks: pad rows masked, pad keys read);
``shape-without-transpose``: ``_shape`` written ``view(B, H, T, d)`` (a natural slip: heads split from the
tokens' axis)."""

import math
import sys

import torch
from torch import nn


def sinusoidal_table(num_positions, dim, padding_idx):
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
    emb = torch.arange(num_positions, dtype=torch.float)[:, None] * freq[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    emb[padding_idx, :] = 0
    return emb


class XGLMAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.scaling = self.head_dim ** -0.5
        self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.q_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _shape(self, tensor, seq_len, bsz):
        if self.bug == "shape-without-transpose":
            return tensor.view(bsz, self.num_heads, seq_len, self.head_dim).contiguous()
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.num_heads * self.head_dim)
        return self.out_proj(attn_output)


class XGLMModel(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.bug, self.padding_idx, self.embed_scale = bug, 1, math.sqrt(dim)
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=1)
        self.register_buffer("weights", sinusoidal_table(64, dim, 1), persistent=False)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.self_attn = XGLMAttention(dim, heads, bug)
        self.final_layer_norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, input_ids, attention_mask):
        bsz, seq_len = input_ids.shape
        dtype = torch.float32
        position_ids = torch.arange(seq_len, dtype=torch.long)[None] + self.padding_idx + 1
        positions = self.weights.index_select(0, position_ids.view(-1)).view(1, seq_len, -1)
        hidden_states = self.embed_tokens(input_ids) * self.embed_scale + positions
        causal = torch.full((seq_len, seq_len), torch.finfo(dtype).min).triu(1)[None, None]
        if self.bug == "padding-on-queries":
            expanded = attention_mask[:, None, :, None].expand(bsz, 1, seq_len, seq_len)
        else:
            expanded = attention_mask[:, None, None, :].expand(bsz, 1, seq_len, seq_len)
        inverted = (1.0 - expanded.to(dtype)) * torch.finfo(dtype).min
        mask = torch.maximum(causal + inverted, torch.tensor(torch.finfo(dtype).min))
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.self_attn_layer_norm(hidden_states), mask)
        residual = hidden_states
        hidden_states = self.fc2(nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


BUGS = ("padding-on-queries", "shape-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(2, 40, (B, T))
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, -2:] = 0                                               # series 0 right-padded
    input_ids[0, -2:] = 1
    return XGLMModel(40, D, H, bug).eval(), (input_ids, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
