"""huggingface/transformers, src/transformers/models/kosmos2/modeling_kosmos2.py (v4.46, ``KosmosTextAttention``,
``Kosmos2TextBlock``, ``Kosmos2TextTransformer``, ``Kosmos2TextSinusoidalPositionalEmbedding``): the grounded text
model. The token embeddings (``embed_tokens(input_ids)``) get the projected image features written into the places
``image_embeds_position_mask`` marks (``inputs_embeds[image_embeds_position_mask == 1] = image_embeds.view(-1, D)``),
are scaled by ``sqrt(D)``, and get sinusoidal positions made from the ids (``create_position_ids_from_input_ids``:
``cumsum(ids != padding_idx) * mask + padding_idx``, then ``index_select`` from the table); then pre-LayerNorm blocks:
``q_proj(h) * scaling``, ``_shape`` (``view(B, T, H, d).transpose(1, 2)``), ``q @ k.transpose(-1, -2)`` plus the
additive causal mask ``(B, 1, T, T)``, ``softmax(dim=-1)``, ``@ v``, ``transpose(1, 2).reshape(B, T, D)``, the
sub-LayerNorm ``inner_attn_ln`` over D (Magneto's sub-LN) and ``out_proj``; an FFN with its own ``ffn_layernorm``.

Bugs (natural slips of a hand port): ``shape-heads-first``: ``_shape`` as ``view(B, H, T, d)`` with no transpose (the
split written straight into the layout the matmul wants, FuxiCTR #30's slip in Kosmos-2's idiom);
``merge-without-transpose``: the heads merged with ``attn_output.reshape(B, T, D)`` straight from ``(B, H, T, d)``
(the ``transpose(1, 2)`` dropped: tokens and heads interleaved in the features)."""

import math
import sys

import torch
from torch import nn

PAD = 1


def sinusoidal_table(num_positions, dim, padding_idx):
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
    angles = torch.arange(num_positions, dtype=torch.float).unsqueeze(1) * freq.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).view(num_positions, -1)
    table[padding_idx, :] = 0
    return table


class KosmosTextAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.inner_attn_ln = nn.LayerNorm(embed_dim)

    def _shape(self, projection):
        bsz, seq_len = projection.shape[:2]
        if self.bug == "shape-heads-first":
            return projection.view(bsz, self.num_heads, seq_len, self.head_dim)
        return projection.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self._shape(self.q_proj(hidden_states) * self.scaling)
        key_states = self._shape(self.k_proj(hidden_states))
        value_states = self._shape(self.v_proj(hidden_states))
        attn_weights = torch.matmul(query_states, key_states.transpose(-1, -2))
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states)                 # (B, H, T, d)
        if self.bug != "merge-without-transpose":
            attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, tgt_len, -1)
        attn_output = self.inner_attn_ln(attn_output)
        return self.out_proj(attn_output)


class Kosmos2TextBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn = KosmosTextAttention(dim, heads, bug)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.ffn_layernorm, self.final_layer_norm = nn.LayerNorm(4 * dim), nn.LayerNorm(dim)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask)
        residual = hidden_states
        hidden_states = nn.functional.gelu(self.fc1(self.final_layer_norm(hidden_states)))
        return residual + self.fc2(self.ffn_layernorm(hidden_states))


class Kosmos2TextTransformer(nn.Module):
    def __init__(self, dim, heads, bug="", vocab=64, max_positions=40):
        super().__init__()
        self.embed_scale = math.sqrt(dim)
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.register_buffer("weights", sinusoidal_table(max_positions + PAD + 1, dim, PAD), persistent=False)
        self.layers = nn.ModuleList([Kosmos2TextBlock(dim, heads, bug)])
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, input_ids, image_embeds, image_embeds_position_mask):
        inputs_embeds = self.embed_tokens(input_ids)
        inputs_embeds[image_embeds_position_mask == 1] = image_embeds.view(-1, image_embeds.size(-1))
        inputs_embeds = inputs_embeds * self.embed_scale
        mask = input_ids.ne(PAD).int()
        position_ids = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + PAD
        positions = self.weights.index_select(0, position_ids.view(-1)).view(*input_ids.shape, -1)
        hidden_states = inputs_embeds + positions
        bsz, seq_len = input_ids.shape
        causal = torch.full((seq_len, seq_len), torch.finfo(hidden_states.dtype).min)
        causal = causal.masked_fill(torch.arange(seq_len) < (torch.arange(seq_len) + 1).view(seq_len, 1), 0.0)
        attention_mask = causal[None, None, :, :].expand(bsz, 1, seq_len, seq_len)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return self.layer_norm(hidden_states)


BUGS = ("shape-heads-first", "merge-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    num_image_tokens = 2
    input_ids = torch.randint(2, 64, (B, T))
    image_embeds_position_mask = torch.zeros(B, T, dtype=torch.long)
    image_embeds_position_mask[:, 1:1 + num_image_tokens] = 1          # <image> x x </image> text ...
    image_embeds = torch.randn(B, num_image_tokens, D)
    return Kosmos2TextTransformer(D, H, bug).eval(), (input_ids, image_embeds, image_embeds_position_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
