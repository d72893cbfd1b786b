"""transformers, src/transformers/models/marian/modeling_marian.py (v4.46, ``MarianSinusoidalPositionalEmbedding``,
``MarianAttention`` used as the decoder's ``encoder_attn``): Helsinki-NLP's translation models. The decoder's
cross-attention: queries from the target ``(B, T, D)``, keys and values from the encoder's ``(B, S, D)``, both
split ``view(B, -1, H, d).transpose(1, 2)``, ``matmul(q, k.transpose(-1, -2))`` ``(B, H, T, S)`` plus the
encoder's padding mask expanded ``mask[:, None, None, :]`` over the target, ``softmax(dim=-1)``, ``matmul`` with
v, ``transpose(1, 2).reshape(B, T, D)``, ``out_proj``. Sinusoidal positions (sin half then cos half) on both
sides.

Bugs: ``keys-from-target``: k and v projected from the decoder's own states (the slip of a self-attention copied
into ``encoder_attn``: the scores become ``(B, H, T, T)``; the source padding mask then no longer lines up);
``key-view-without-transpose``: the cross keys split ``view(B, H, -1, d)`` with no transpose (a natural slip in
a hand-split of the encoder's states: heads cut from the sources' axis)."""

import math
import sys

import torch
from torch import nn


def sinusoidal(n_pos, dim):
    position = torch.arange(n_pos, dtype=torch.float)[:, None]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim))
    return torch.cat([torch.sin(position * div), torch.cos(position * div)], dim=-1)


class MarianAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.head_dim = heads, dim // heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, hidden_states, key_value_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2) * self.scaling
        if self.bug == "key-view-without-transpose":
            k = self.k_proj(key_value_states).view(bsz, self.num_heads, -1, self.head_dim)
        else:
            k = self.k_proj(key_value_states).view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(key_value_states).view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2))
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = nn.functional.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, tgt_len, -1)
        return self.out_proj(out)


class MarianDecoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn = MarianAttention(dim, heads)
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.encoder_attn = MarianAttention(dim, heads, bug)
        self.encoder_attn_layer_norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, hidden_states, encoder_hidden_states, causal_mask, encoder_mask):
        hidden_states = self.self_attn_layer_norm(
            hidden_states + self.self_attn(hidden_states, hidden_states, causal_mask))
        source = hidden_states if self.bug == "keys-from-target" else encoder_hidden_states
        mask = None if self.bug == "keys-from-target" else encoder_mask
        hidden_states = self.encoder_attn_layer_norm(hidden_states + self.encoder_attn(hidden_states, source, mask))
        ffn = self.fc2(nn.functional.silu(self.fc1(hidden_states)))
        return self.final_layer_norm(hidden_states + ffn)


class MarianDecoder(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.bug, self.embed_scale = bug, math.sqrt(dim)
        self.embed_tokens = nn.Embedding(vocab, dim, padding_idx=0)
        self.register_buffer("pos", sinusoidal(64, dim), persistent=False)
        self.layer = MarianDecoderLayer(dim, heads, bug)

    def forward(self, input_ids, encoder_hidden_states, encoder_attention_mask):
        bsz, tgt_len = input_ids.shape
        dtype = torch.float32
        hidden_states = self.embed_tokens(input_ids) * self.embed_scale + self.pos[:tgt_len]
        causal = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min).triu(1)[None, None]
        expanded = encoder_attention_mask[:, None, None, :]
        encoder_mask = (1.0 - expanded.to(dtype)) * torch.finfo(dtype).min
        return self.layer(hidden_states, encoder_hidden_states, causal, encoder_mask)


BUGS = ("keys-from-target", "key-view-without-transpose")
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)
EQUAL = {"B=2 T=6 S=5 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(1, 40, (B, T))
    encoder_hidden_states = torch.randn(B, S, D)
    encoder_attention_mask = torch.ones(B, S, dtype=torch.long)
    encoder_attention_mask[0, -2:] = 0                                       # source 0 right-padded
    return MarianDecoder(40, D, H, bug).eval(), (input_ids, encoder_hidden_states, encoder_attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
