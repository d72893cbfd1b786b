"""huggingface/transformers, src/transformers/models/moonshine/modeling_moonshine.py (v4.48, ``MoonshineEncoder``,
``MoonshineAttention``, ``MoonshineRotaryEmbedding``, ``apply_rotary_pos_emb``, ``rotate_half``): Moonshine's
audio encoder. Raw audio ``(B, N)`` is ``unsqueeze(1)``ed through ``conv1 (1 -> D, kernel 127, stride 64)``,
``tanh``, ``GroupNorm(1, D)``, ``conv2 (D -> 2D, 7, stride 3)``, ``gelu``, ``conv3 (2D -> D, 3, stride 2)``,
``gelu``, ``permute(0, 2, 1)``; pre-norm layers (``LayerNorm`` without bias) with partial, interleaved rotary:
``inv_freq`` over ``rotary_ndims = int(head_dim · 0.9)``, ``cos``/``sin`` of ``cat((freqs, freqs))`` cut to their first
half and ``repeat_interleave(2)``, applied to ``q[..., :rotary_dim]`` with the interleaved ``rotate_half``
(``stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)``), the rest passed through and ``cat``ed back;
``softmax(q kᵀ · d^-0.5)`` (no mask: the encoder is bidirectional), ``transpose(1, 2).reshape(B, T, D)``, ``o_proj``.

Bugs: ``rotate-half-by-halves``: ``rotate_half`` written Llama's way (``cat((-x2, x1))`` of the two halves) against
the interleaved ``cos``/``sin`` (the pairs rotated are not the pairs the table's frequencies belong to: a port's
copy of Llama's helper); ``conv-out-reshape``: the stem's ``(B, D, T)`` output ``reshape(B, T, D)``d instead of
``permute(0, 2, 1)``d (features and frames mixed)."""

import sys

import torch
from torch import nn


def rotate_half(x, bug=""):
    if bug == "rotate-half-by-halves":
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_pos_emb(q, k, cos, sin, bug="", unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
    sin = sin[..., : sin.shape[-1] // 2].repeat_interleave(2, dim=-1)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot, bug) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot, bug) * sin)
    return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)


class MoonshineRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, partial_rotary_factor=0.9, base=10000.0):
        super().__init__()
        dim = int(head_dim * partial_rotary_factor)
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class MoonshineAttention(nn.Module):
    def __init__(self, hidden_size, heads, bug=""):
        super().__init__()
        self.head_dim, self.num_heads, self.bug = hidden_size // heads, heads, bug
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, self.bug)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        return self.o_proj(attn_output.reshape(*input_shape, -1))


class MoonshineEncoderLayer(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.self_attn = MoonshineAttention(D, H, bug)
        self.input_layernorm = nn.LayerNorm(D, bias=False)
        self.post_attention_layernorm = nn.LayerNorm(D, bias=False)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, hidden_states, position_embeddings):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), position_embeddings)
        mlp = self.fc2(nn.functional.gelu(self.fc1(self.post_attention_layernorm(hidden_states))))
        return hidden_states + mlp


class MoonshineEncoder(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.conv1 = nn.Conv1d(1, D, kernel_size=127, stride=64, bias=False)
        self.conv2 = nn.Conv1d(D, 2 * D, kernel_size=7, stride=3)
        self.conv3 = nn.Conv1d(2 * D, D, kernel_size=3, stride=2)
        self.groupnorm = nn.GroupNorm(num_groups=1, num_channels=D, eps=1e-5)
        self.rotary_emb = MoonshineRotaryEmbedding(D // H)
        self.layers = nn.ModuleList([MoonshineEncoderLayer(D, H, bug) for _ in range(2)])
        self.layer_norm = nn.LayerNorm(D, bias=False)
        self.bug = bug

    def forward(self, input_values):
        input_values = input_values.unsqueeze(1)
        hidden_states = nn.functional.tanh(self.conv1(input_values))
        hidden_states = self.groupnorm(hidden_states)
        hidden_states = nn.functional.gelu(self.conv2(hidden_states))
        hidden_states = nn.functional.gelu(self.conv3(hidden_states))
        if self.bug == "conv-out-reshape":
            hidden_states = hidden_states.reshape(hidden_states.shape[0], hidden_states.shape[2], -1)
        else:
            hidden_states = hidden_states.permute(0, 2, 1)
        position_ids = torch.arange(0, hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings)
        return self.layer_norm(hidden_states)


BUGS = ("rotate-half-by-halves", "conv-out-reshape")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    samples = 64 * (3 * (2 * (T - 1) + 3 - 1) + 7 - 1) + 127                # T frames after the three convs
    input_values = torch.randn(B, samples) * 0.1
    return MoonshineEncoder(D, H, bug).eval(), (input_values,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
