"""NVIDIA/TransformerEngine issue #629 ("[PyTorch] FlashAttention: causal masking enforced in cross attention due
to sliding window attention", labelled bug; introduced by PR #551): in a decoder ``TransformerLayer`` with
``self_attn_mask_type="causal"`` the layer set ``window_size = (-1, 0)`` and passed it to both the
self-attention and the ``inter_attention`` over the encoder output, so the cross attention, whose mask type is
``padding``, was banded as well: a window ``(-1, 0)`` on ``(T, S)`` scores, aligned bottom-right as flash-attn
aligns it, lets target token i see source tokens ``0 .. i + S - T`` only. The fix keeps the window to the
self-attention.

TransformerEngine's idiom in eager torch (its ``UnfusedDotProductAttention`` reference): ``layernorm_qkv``
and ``layernorm_query`` + ``key_value`` projections, ``[B, T, H, d]`` heads, the window mask built from
positions (``q_idx + (S - T)`` against ``kv_idx``: hidden where ``kv > q + S - T + right`` or ``kv < q + S - T
- left``, ``left = -1`` no bound), OR-ed with the padding mask (``True`` = hidden), ``masked_fill(-10000)``,
``softmax``, ``proj``. The second source sentence ends in two padding tokens.

Bug (argument): ``window-into-cross``: the self-attention's ``window_size`` handed to the cross attention."""

import math
import sys

import torch
from torch import nn

BUGS = ("window-into-cross",)
TWINS = ()
DIMS = ("B=2 T=6 S=8 D=32 H=4",)
EQUAL = {"B=2 T=6 S=8 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


def window_mask(seqlen_q, seqlen_kv, window_size):
    left, right = window_size
    q_idx = torch.arange(seqlen_q).view(-1, 1) + (seqlen_kv - seqlen_q)         # bottom-right aligned
    kv_idx = torch.arange(seqlen_kv).view(1, -1)
    hidden = kv_idx > q_idx + right                                             # [window]
    if left >= 0:
        hidden = hidden | (kv_idx < q_idx - left)
    return hidden.view(1, 1, seqlen_q, seqlen_kv)                               # (1, 1, T, S), True = hidden


class UnfusedDotProductAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads

    def forward(self, q, k, v, attention_mask=None, window_size=None):
        b, sq, h, d = q.shape
        sk = k.shape[1]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)          # (B, H, T, S)
        mask = attention_mask
        if window_size is not None:
            band = window_mask(sq, sk, window_size)
            mask = band if mask is None else mask | band
        if mask is not None:
            scores = scores.masked_fill(mask, -10000.0)
        probs = torch.softmax(scores, dim=-1)
        return torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, sq, h * d)   # (B, T, D)


class MultiheadAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, attention_type="self"):
        super().__init__()
        self.num_heads, self.head_dim, self.attention_type = num_heads, hidden_size // num_heads, attention_type
        self.layernorm = nn.LayerNorm(hidden_size)
        if attention_type == "self":
            self.layernorm_qkv = nn.Linear(hidden_size, 3 * hidden_size)
        else:
            self.layernorm_query = nn.Linear(hidden_size, hidden_size)
            self.key_value = nn.Linear(hidden_size, 2 * hidden_size)
        self.core_attention = UnfusedDotProductAttention(hidden_size, num_heads)
        self.proj = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states, encoder_output=None, attention_mask=None, window_size=None):
        b, t, _ = hidden_states.shape
        x = self.layernorm(hidden_states)
        if self.attention_type == "self":
            q, k, v = self.layernorm_qkv(x).view(b, t, self.num_heads, 3 * self.head_dim).chunk(3, dim=-1)
        else:
            s = encoder_output.shape[1]
            q = self.layernorm_query(x).view(b, t, self.num_heads, self.head_dim)          # (B, T, H, d)
            k, v = self.key_value(encoder_output).view(b, s, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        return self.proj(self.core_attention(q, k, v, attention_mask, window_size))


class TransformerLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attention = MultiheadAttention(hidden_size, num_heads, "self")
        self.inter_attention = MultiheadAttention(hidden_size, num_heads, "cross")

    def forward(self, hidden_states, encoder_output, enc_dec_attn_mask):
        window_size = (-1, 0)                                   # self_attn_mask_type == "causal"
        hidden_states = hidden_states + self.self_attention(hidden_states, window_size=window_size)
        cross_window = window_size if self.bug == "window-into-cross" else None
        return hidden_states + self.inter_attention(hidden_states, encoder_output, enc_dec_attn_mask, cross_window)


def build(bug="", B=2, T=6, S=8, D=32, H=4):
    torch.manual_seed(0)
    padding = torch.zeros(B, S, dtype=torch.bool)
    padding[-1, -2:] = True                                     # the last source padded by 2
    return TransformerLayer(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D),
                                               padding.view(B, 1, 1, S))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
