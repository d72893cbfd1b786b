"""espnet/espnet, espnet2/tts/transformer/transformer.py (``Transformer._forward``, ``_source_mask``,
``_target_mask``, ``_add_first_frame_and_remove_last_frame``), espnet/nets/pytorch_backend/transformer/attention.py
(``MultiHeadedAttention.forward_qkv``/``forward_attention``), decoder_layer.py (``DecoderLayer``), mask.py
(``subsequent_mask``) and embedding.py (``ScaledPositionalEncoding``): Transformer-TTS, text to mel frames, one
encoder and one decoder layer, reduction factor 1. The phonemes are embedded and given ``x + alpha * pe[:, :T]``;
the source mask is ``make_non_pad_mask(ilens).unsqueeze(-2)`` ``(B, 1, S)``. The decoder reads the target frames
shifted right by one (``cat([ys.new_zeros(B, 1, odim), ys[:, :-1]], dim=1)``) through a ReLU prenet and the same
scaled positions; its self mask is ``make_non_pad_mask(olens).unsqueeze(-2) & subsequent_mask(T).unsqueeze(0)``
``(B, T, T)``, its source attention reads the encoder's states under the source mask. ``MultiHeadedAttention``:
``view(n_batch, -1, h, d_k).transpose(1, 2)``, ``matmul(q, k.transpose(-2, -1)) / sqrt(d_k)``, ``mask.unsqueeze(1)
.eq(0)``, ``masked_fill(mask, finfo.min)``, ``softmax(dim=-1).masked_fill(mask, 0.0)``, ``transpose(1, 2)
.contiguous().view(n_batch, -1, h * d_k)``, ``linear_out``. Pre-norm layers, ``feat_out`` to the mel bins.

Bugs: ``kv-view-heads-first``: ``forward_qkv`` cutting the keys and values ``view(n_batch, self.h, -1, self.d_k)``
with no transpose (the query kept right: each "head" of a key is a run of whole frames' features, the heads cut from
the time axis); ``softmax-unmasked``: the ``masked_fill(mask, min_value)`` before the softmax dropped, only the
zeroing after it kept (an old ``forward_attention`` port: the weights no longer sum to one, the padded keys and the
future still take their share before being zeroed); ``first-frame-not-shifted``: the decoder fed ``ys`` itself, not
shifted right (teacher forcing leaks: frame ``t`` is predicted from an input that holds frame ``t``)."""

import math
import sys

import torch
from torch import nn


def make_non_pad_mask(lengths, maxlen):
    return torch.arange(maxlen)[None, :] < lengths[:, None]                          # (B, L)


def subsequent_mask(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool))                      # (L, L)


class ScaledPositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=32):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(1.0))
        position = torch.arange(0, max_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)               # (1, max_len, D)

    def forward(self, x):
        return x + self.alpha * self.pe[:, : x.size(1)]


class MultiHeadedAttention(nn.Module):
    def __init__(self, n_head, n_feat, bug=""):
        super().__init__()
        self.d_k, self.h, self.bug = n_feat // n_head, n_head, bug
        self.linear_q, self.linear_k = nn.Linear(n_feat, n_feat), nn.Linear(n_feat, n_feat)
        self.linear_v, self.linear_out = nn.Linear(n_feat, n_feat), nn.Linear(n_feat, n_feat)

    def forward(self, query, key, value, mask):
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)   # (batch, head, time1, d_k)
        if self.bug == "kv-view-heads-first":
            k = self.linear_k(key).view(n_batch, self.h, -1, self.d_k)                 # (batch, head, time2, d_k)
            v = self.linear_v(value).view(n_batch, self.h, -1, self.d_k)               # (batch, head, time2, d_k)
        else:
            k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)   # (batch, head, time2, d_k)
            v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)           # (batch, head, time1, time2)
        mask = mask.unsqueeze(1).eq(0)                                                 # (batch, 1, *, time2)
        if self.bug != "softmax-unmasked":
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
        x = torch.matmul(attn, v)                                                      # (batch, head, time1, d_k)
        x = x.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k)       # (batch, time1, d_model)
        return self.linear_out(x)


class TransformerTTSSketch(nn.Module):
    def __init__(self, idim, odim, adim, aheads, bug=""):
        super().__init__()
        self.bug, self.odim = bug, odim
        self.encoder_embed = nn.Sequential(nn.Embedding(idim, adim), ScaledPositionalEncoding(adim))
        self.enc_norm, self.enc_attn = nn.LayerNorm(adim), MultiHeadedAttention(aheads, adim, bug)
        self.decoder_embed = nn.Sequential(nn.Linear(odim, adim), nn.ReLU(), ScaledPositionalEncoding(adim))
        self.norm1, self.self_attn = nn.LayerNorm(adim), MultiHeadedAttention(aheads, adim, bug)
        self.norm2, self.src_attn = nn.LayerNorm(adim), MultiHeadedAttention(aheads, adim, bug)
        self.feat_out = nn.Linear(adim, odim)

    def _target_mask(self, olens, maxlen):
        y_masks = make_non_pad_mask(olens, maxlen)                                    # (B, T)
        s_masks = subsequent_mask(maxlen).unsqueeze(0)                               # (1, T, T)
        return y_masks.unsqueeze(-2) & s_masks                                       # (B, T, T)

    def forward(self, xs, ilens, ys, olens):                                          # (B, S), (B,), (B, T, odim), (B,)
        x_masks = make_non_pad_mask(ilens, xs.size(1)).unsqueeze(-2)                 # (B, 1, S)
        hs = self.encoder_embed(xs)                                                  # (B, S, adim)
        h = self.enc_norm(hs)
        hs = hs + self.enc_attn(h, h, h, x_masks)
        if self.bug == "first-frame-not-shifted":
            ys_in = ys
        else:
            ys_in = torch.cat([ys.new_zeros((ys.size(0), 1, self.odim)), ys[:, :-1]], dim=1)   # (B, T, odim)
        y_masks = self._target_mask(olens, ys.size(1))                               # (B, T, T)
        x = self.decoder_embed(ys_in)                                                # (B, T, adim)
        t = self.norm1(x)
        x = x + self.self_attn(t, t, t, y_masks)
        t = self.norm2(x)
        x = x + self.src_attn(t, hs, hs, x_masks)
        return self.feat_out(x)                                                      # (B, T, odim)


BUGS = ("kv-view-heads-first", "softmax-unmasked", "first-frame-not-shifted")
TWINS = ()
DIMS = ("B=2 T=7 D=32 H=4 S=5",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 S=4"}


def build(bug="", B=2, T=7, D=32, H=4, S=5):  # noqa: N803
    """Phoneme ids ``(B, S)``, the second text 1 shorter; 10 mel bins ``(B, T, 10)``, the second 2 frames shorter."""
    torch.manual_seed(0)
    ilens, olens = torch.tensor([S] + [S - 1] * (B - 1)), torch.tensor([T] + [T - 2] * (B - 1))
    xs = torch.randint(1, 30, (B, S)).masked_fill(torch.arange(S)[None] >= ilens[:, None], 0)
    ys = torch.randn(B, T, 10).masked_fill((torch.arange(T)[None] >= olens[:, None])[..., None], 0.0)
    return TransformerTTSSketch(30, 10, D, H, bug=bug).eval(), (xs, ilens, ys, olens)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
