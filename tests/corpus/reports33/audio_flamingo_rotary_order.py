"""NVIDIA/audio-flamingo issue #27 ("Bug in Rotary Position Embedding of TransformerEncoder class", closed with
the fix): in ``inference/src/helpers.py`` the ``MultiHeadAttention`` of the audio ``TransformerEncoder`` applied
``apply_rotary_pos_emb`` to ``q`` and ``k`` viewed ``b x lq x n x dv`` and transposed them to ``b x n x lq x dv``
only afterwards; ``apply_rotary_pos_emb`` reads the sequence from ``t.shape[-2]`` (there the number of heads),
keeps the *last* ``n_head`` rows of the frequency table and rotates each head by a position, every token alike.
The reporter: "Somehow the code still works ... but I think the position information is not correctly
reflected"; the fix moves the transpose before the rotary call (the repository's code now).

The idiom (audio-flamingo's encoder, after jadore801120's attention-is-all-you-need-pytorch): ``w_qs``/``w_ks``/
``w_vs`` without bias, ``view(sz_b, len_q, n_head, d_k)``, ``transpose(1, 2)``, a lucidrains-style
``RotaryEmbedding`` (``inv_freq``, ``einsum('i , j -> i j', t, inv_freq)``, ``cat((freqs, freqs))``,
``forward_from_seq_len``), partial rotary on the first ``rot_dim`` features with einops' ``rotate_half``, the key
mask ``mask.unsqueeze(1).unsqueeze(2)`` and ``masked_fill(mask == 0, -1e9)``, ``q / temperature @ k^T``,
``softmax(dim=-1)``, heads merged ``transpose(1, 2).contiguous().view(sz_b, len_q, -1)``, ``fc``, the residual
and a post ``LayerNorm``, then the position-wise feed-forward. One layer; the rotary width is
``dim_head // 2`` (the repository's ``max(dim_head // 2, 32)`` is 32 = ``dim_head // 2`` at its ``dim_head`` 64;
at the small sizes here 32 would exceed the head). The second clip ends in two padded frames.

Bug (order): ``rotary-before-transpose``: the rotary embedding applied to ``(B, T, H, d_k)``."""

import sys
from functools import reduce

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("rotary-before-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=4096):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward_from_seq_len(self, seq_len):
        return self.forward(torch.arange(seq_len, device=self.inv_freq.device))

    def forward(self, t):
        t = t.to(torch.float32)
        freqs = torch.einsum("i , j -> i j", t, self.inv_freq)                  # (T, rot/2)
        return torch.cat((freqs, freqs), dim=-1), 1.0                           # (T, rot)


def rotate_half(x):
    x = rearrange(x, "... (j d) -> ... j d", j=2)
    x1, x2 = x.unbind(dim=-2)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(t, freqs, scale=1):
    out_dtype = t.dtype
    dtype = reduce(torch.promote_types, (t.dtype, freqs.dtype, torch.float32))
    rot_dim, seq_len = freqs.shape[-1], t.shape[-2]
    freqs, t = freqs.to(dtype), t.to(dtype)
    freqs = freqs[-seq_len:, :]
    t, t_unrotated = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)
    return torch.cat((t.to(out_dtype), t_unrotated.to(out_dtype)), dim=-1)


class ScaledDotProductAttention(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, q, k, v, mask=None):
        attn = torch.matmul(q / self.temperature, k.transpose(2, 3))           # (B, H, T, T)
        if mask is not None:
            attn = attn.masked_fill(mask == 0, -1e9)
        attn = F.softmax(attn, dim=-1)
        return torch.matmul(attn, v), attn                                      # (B, H, T, d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, bug=""):
        super().__init__()
        self.bug = bug
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_ks = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_vs = nn.Linear(d_model, n_head * d_v, bias=False)
        self.fc = nn.Linear(n_head * d_v, d_model, bias=False)
        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, q, k, v, mask=None, rotary_frequencies=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.size(0), q.size(1), k.size(1), v.size(1)
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)                         # (B, T, H, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)                         # (B, T, H, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)                         # (B, T, H, d_v)
        if self.bug == "rotary-before-transpose":
            q = apply_rotary_pos_emb(q, rotary_frequencies)
            k = apply_rotary_pos_emb(k, rotary_frequencies)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)       # (B, H, T, d_k)
        if self.bug != "rotary-before-transpose":
            q = apply_rotary_pos_emb(q, rotary_frequencies)
            k = apply_rotary_pos_emb(k, rotary_frequencies)
        if mask is not None:
            mask = mask.unsqueeze(1).unsqueeze(2)                               # (B, 1, 1, T)
        q, attn = self.attention(q, k, v, mask=mask)
        q = q.transpose(1, 2).contiguous().view(sz_b, len_q, -1)                # (B, T, H*d_v)
        q = self.fc(q)
        q += residual
        return self.layer_norm(q), attn


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_in, d_hid):
        super().__init__()
        self.w_1 = nn.Linear(d_in, d_hid)
        self.w_2 = nn.Linear(d_hid, d_in)
        self.layer_norm = nn.LayerNorm(d_in, eps=1e-6)

    def forward(self, x):
        residual = x
        x = self.w_2(F.relu(self.w_1(x)))
        x += residual
        return self.layer_norm(x)


class TransformerEncoder(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        dim_head = d_model // n_head
        self.position_enc = RotaryEmbedding(dim_head // 2)
        self.slf_attn = MultiHeadAttention(n_head, d_model, dim_head, dim_head, bug=bug)
        self.pos_ffn = PositionwiseFeedForward(d_model, 4 * d_model)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)
        self.d_model = d_model

    def forward(self, src_seq, causal_mask=None):                               # (B, T, D)
        enc_output = src_seq * self.d_model ** 0.5
        freqs, _ = self.position_enc.forward_from_seq_len(enc_output.shape[1])
        enc_output = self.layer_norm(enc_output)
        enc_output, _ = self.slf_attn(enc_output, enc_output, enc_output, mask=causal_mask,
                                      rotary_frequencies=freqs)
        return self.pos_ffn(enc_output)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    mask = torch.ones(B, T)
    mask[1:, T - 2:] = 0                                                        # the second clip ends in padding
    return TransformerEncoder(D, H, bug=bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
