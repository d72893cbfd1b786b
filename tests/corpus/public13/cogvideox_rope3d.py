"""huggingface/diffusers, src/diffusers/models/attention_processor.py (v0.31, ``CogVideoXAttnProcessor2_0``),
src/diffusers/models/embeddings.py (``get_3d_rotary_pos_embed``, ``apply_rotary_emb`` with ``use_real=True``,
``use_real_unbind_dim=-1``) and src/diffusers/models/transformers/cogvideox_transformer_3d.py: the text tokens
joined before the video tokens (``cat([encoder_hidden_states, hidden_states], dim=1)``), ``to_q``/``to_k``/``to_v``
viewed ``(B, -1, H, d).transpose(1, 2)``, ``norm_q``/``norm_k`` (a LayerNorm over ``head_dim``), the 3-D rotary
applied to the video part only (``query[:, :, text_seq_length:] = apply_rotary_emb(query[:, :,
text_seq_length:], image_rotary_emb)``); the table: a temporal band of ``d/4`` and spatial bands of ``3d/8``
each, ``freqs_t[:, None, None, :]``, ``freqs_h[None, :, None, :]``, ``freqs_w[None, None, :, :]`` expanded to
``(F, h, w, ·)``, ``cat`` on the features and ``view(F * h * w, -1)``, each band ``repeat_interleave(2)``
(pairs interleaved: ``x.reshape(*x.shape[:-1], -1, 2).unbind(-1)``, ``stack([-x_imag, x_real], -1).flatten(3)``);
``F.scaled_dot_product_attention``, ``transpose(1, 2).reshape(B, -1, H * d)``, ``to_out``, and the two parts
split back ``split([text_seq_length, N], dim=1)``. Video of F = 2 frames of 2 x (T / 4) patches; S text tokens.

Bugs (argument): ``rope-on-leading``: the rotary applied to ``query[:, :, :-text_seq_length]`` (the slice that
drops the text from the wrong end, a natural slip once the text goes first: the text tokens are rotated with
video positions and the last S video tokens not at all)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def get_1d_freqs(dim, pos, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
    return torch.outer(pos.float(), freqs)                                          # (n, dim/2)


def get_3d_rotary_pos_embed(embed_dim, grid_h, grid_w, temporal_size):
    dim_t, dim_h, dim_w = embed_dim // 4, embed_dim // 8 * 3, embed_dim // 8 * 3
    freqs_t = get_1d_freqs(dim_t, torch.arange(temporal_size))                     # (F, dim_t/2)
    freqs_h = get_1d_freqs(dim_h, torch.arange(grid_h))                            # (h, dim_h/2)
    freqs_w = get_1d_freqs(dim_w, torch.arange(grid_w))                            # (w, dim_w/2)
    freqs_t = freqs_t[:, None, None, :].expand(-1, grid_h, grid_w, -1)
    freqs_h = freqs_h[None, :, None, :].expand(temporal_size, -1, grid_w, -1)
    freqs_w = freqs_w[None, None, :, :].expand(temporal_size, grid_h, -1, -1)
    freqs = torch.cat([freqs_t, freqs_h, freqs_w], dim=-1)                          # (F, h, w, d/2)
    freqs = freqs.view(temporal_size * grid_h * grid_w, -1).repeat_interleave(2, dim=-1)  # (N, d)
    return freqs.cos(), freqs.sin()


def apply_rotary_emb(x, freqs_cis):                                                 # (B, H, N, d)
    cos, sin = freqs_cis
    cos, sin = cos[None, None], sin[None, None]
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


class CogVideoXAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.to_q, self.to_k, self.to_v = (nn.Linear(dim, dim) for _ in range(3))
        self.norm_q, self.norm_k = nn.LayerNorm(self.head_dim), nn.LayerNorm(self.head_dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, hidden_states, encoder_hidden_states, image_rotary_emb):
        text_seq_length = encoder_hidden_states.size(1)
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)    # (B, S+N, D)
        batch_size = hidden_states.shape[0]
        query = self.to_q(hidden_states).view(batch_size, -1, self.heads, self.head_dim).transpose(1, 2)
        key = self.to_k(hidden_states).view(batch_size, -1, self.heads, self.head_dim).transpose(1, 2)
        value = self.to_v(hidden_states).view(batch_size, -1, self.heads, self.head_dim).transpose(1, 2)
        query, key = self.norm_q(query), self.norm_k(key)
        if self.bug == "rope-on-leading":
            query[:, :, :-text_seq_length] = apply_rotary_emb(query[:, :, :-text_seq_length], image_rotary_emb)
            key[:, :, :-text_seq_length] = apply_rotary_emb(key[:, :, :-text_seq_length], image_rotary_emb)
        else:
            query[:, :, text_seq_length:] = apply_rotary_emb(query[:, :, text_seq_length:], image_rotary_emb)
            key[:, :, text_seq_length:] = apply_rotary_emb(key[:, :, text_seq_length:], image_rotary_emb)
        hidden_states = F.scaled_dot_product_attention(query, key, value)          # (B, H, S+N, d)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * self.head_dim)
        hidden_states = self.to_out(hidden_states)
        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1)
        return hidden_states, encoder_hidden_states


class CogVideoXBlock(nn.Module):
    def __init__(self, dim, heads, frames, grid_h, grid_w, bug=""):
        super().__init__()
        self.norm1, self.attn1 = nn.LayerNorm(dim), CogVideoXAttention(dim, heads, bug)
        cos, sin = get_3d_rotary_pos_embed(dim // heads, grid_h, grid_w, frames)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, hidden_states, encoder_hidden_states):                         # (B, N, D), (B, S, D)
        attn_hidden, attn_encoder = self.attn1(self.norm1(hidden_states), self.norm1(encoder_hidden_states),
                                               (self.cos, self.sin))
        return hidden_states + attn_hidden, encoder_hidden_states + attn_encoder


BUGS = ("rope-on-leading",)
TWINS = ()
DIMS = ("B=2 T=12 S=3 D=64 H=4",)


def build(bug="", B=2, T=12, S=3, D=64, H=4):
    torch.manual_seed(0)
    frames, grid_h = 2, 2
    block = CogVideoXBlock(D, H, frames, grid_h, T // (frames * grid_h), bug).eval()
    return block, (torch.randn(B, T, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
