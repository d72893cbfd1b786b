"""openai/whisper, whisper/model.py: ``AudioEncoder`` (two ``Conv1d`` over the mel frames, the second
with stride 2, ``x.permute(0, 2, 1)``, plus the ``sinusoids`` table), ``TextDecoder`` (token embedding
plus ``positional_embedding[offset : offset + x.shape[-1]]``, a causal ``mask`` buffer of ``-inf``
``triu_(1)``) and ``MultiHeadAttention.qkv_attention``: ``q.view(*q.shape[:2], n_head, -1).permute(0, 2,
1, 3) * scale`` with ``scale = d ** -0.25``, ``k ... .permute(0, 2, 3, 1) * scale`` (keys already
transposed), ``qk + mask[:n_ctx, :n_ctx]`` in the decoder's self-attention only, ``softmax(-1)``,
``(w @ v).permute(0, 2, 1, 3).flatten(start_dim=2)``; the decoder's cross-attention reads the encoder's
output.

Bugs (argument): ``positions-from-batch``: ``positional_embedding[offset : offset + x.shape[0]]``, the
batch size for the token count (the positions-from-``x.size(0)`` class of issue 33; with one sequence it
broadcasts and every token gets position 0); ``cross-mask``: the decoder's causal mask added in the
cross-attention too, cut to the audio's length (``mask[:n_ctx, :n_audio]``): later audio frames hidden
from early tokens."""

import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def sinusoids(length, channels, max_timescale=10000):
    log_timescale_increment = np.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, np.newaxis] * inv_timescales[np.newaxis, :]  # (L, C/2)
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)  # (L, C)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.n_head = n_head
        self.query, self.key = nn.Linear(n_state, n_state), nn.Linear(n_state, n_state, bias=False)
        self.value, self.out = nn.Linear(n_state, n_state), nn.Linear(n_state, n_state)

    def forward(self, x, xa=None, mask=None):
        q = self.query(x)
        k = self.key(x if xa is None else xa)
        v = self.value(x if xa is None else xa)
        return self.out(self.qkv_attention(q, k, v, mask))

    def qkv_attention(self, q, k, v, mask=None):
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3) * scale  # (B, H, T, d)
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 3, 1) * scale  # (B, H, d, S)
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)  # (B, H, S, d)
        qk = q @ k  # (B, H, T, S)
        if mask is not None:
            qk = qk + mask[:n_ctx, :qk.shape[-1]]
        w = F.softmax(qk.float(), dim=-1).to(q.dtype)
        return (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2)  # (B, T, D)


class Whisper(nn.Module):
    def __init__(self, n_mels=8, n_audio_ctx=10, n_vocab=50, n_text_ctx=12, n_state=32, n_head=4, bug=""):
        super().__init__()
        self.bug = bug
        self.conv1 = nn.Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("audio_positions", sinusoids(n_audio_ctx, n_state))
        self.enc_attn, self.enc_ln = MultiHeadAttention(n_state, n_head), nn.LayerNorm(n_state)
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.randn(n_text_ctx, n_state) * 0.02)
        self.attn, self.attn_ln = MultiHeadAttention(n_state, n_head), nn.LayerNorm(n_state)
        self.cross_attn, self.cross_attn_ln = MultiHeadAttention(n_state, n_head), nn.LayerNorm(n_state)
        self.register_buffer("mask", torch.empty(n_text_ctx, n_text_ctx).fill_(-np.inf).triu_(1), persistent=False)

    def encode(self, mel):
        x = F.gelu(self.conv1(mel))  # (B, D, F)
        x = F.gelu(self.conv2(x))  # (B, D, F/2)
        x = x.permute(0, 2, 1)  # (B, S, D)
        x = (x + self.audio_positions[: x.shape[1]]).to(x.dtype)
        return x + self.enc_attn(self.enc_ln(x))

    def forward(self, mel, tokens, offset=0):
        xa = self.encode(mel)  # (B, S, D)
        n = tokens.shape[0] if self.bug == "positions-from-batch" else tokens.shape[-1]
        x = self.token_embedding(tokens) + self.positional_embedding[offset: offset + n]  # (B, T, D)
        x = x + self.attn(self.attn_ln(x), mask=self.mask)
        cross_mask = self.mask if self.bug == "cross-mask" else None
        x = x + self.cross_attn(self.cross_attn_ln(x), xa, mask=cross_mask)
        return x @ torch.transpose(self.token_embedding.weight, 0, 1)  # (B, T, vocab)


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    """--dims 'B=2 T=6 S=5 D=32 H=4': 2·S mel frames of 8 bins, T tokens."""
    torch.manual_seed(0)
    return Whisper(n_state=D, n_head=H, bug=bug).eval(), (torch.randn(B, 8, 2 * S), torch.randint(0, 50, (B, T)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
