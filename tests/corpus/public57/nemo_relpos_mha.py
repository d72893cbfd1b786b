"""NVIDIA/NeMo, nemo/collections/asr/parts/submodules/multi_head_attention.py (``MultiHeadAttention.forward_qkv``
and ``forward_attention``, ``RelPositionMultiHeadAttention.rel_shift`` and ``forward``, ``RelPositionalEncoding``
with ``extend_pe``/``create_pe``) and nemo/collections/asr/modules/conformer_encoder.py (``_create_masks``): the
Conformer's Transformer-XL attention. ``RelPositionalEncoding`` holds sinusoids for positions ``L - 1 ... -(L -
1)`` of its longest length ``L`` and cuts the centre ``2T - 1`` (``center_pos = pe.size(1) // 2 + 1``, ``start_pos =
center_pos - T``); ``pos_bias_u``/``pos_bias_v`` ``(h, d_k)`` added to the queries; ``matrix_bd = matmul(q_with_bias_v,
p.transpose(-2, -1))`` shifted by ``rel_shift`` (``F.pad(x, pad=(1, 0))``, ``view(b, h, -1, qlen)``, ``x[:, :, 1:]
.view(b, h, qlen, pos_len)``), cut to ``[:, :, :, :T]``; ``(matrix_ac + matrix_bd) / sqrt(d_k)``; the mask
``(B, T, T)``: ``pad_mask.unsqueeze(1).repeat([1, T, 1])`` and-ed with its transpose, inverted, ``unsqueeze(1)``,
``masked_fill(mask, -10000.0)``, ``softmax(dim=-1)``, ``masked_fill(mask, 0.0)``.

Bugs: ``rel-shift-pad-right``: ``F.pad(x, pad=(0, 1))`` (the zero column on the wrong side: every score reads the
relative position one step off, and the padding zero lands inside the window); ``pos-window-from-start``:
``pos_emb = self.pe[:, :2 * input_len - 1]`` (ESPnet's legacy slice, right only when ``pe`` was built for this very
length; NeMo's is built for the longest: the window holds positions ``L - 1`` down to ``L - 2T + 1``, none of them
the real offsets); ``att-mask-rows-only``: ``att_mask = pad_mask.unsqueeze(2).repeat([1, 1, T])`` without the
``logical_and`` with the transpose (the padded frames' rows hidden, their columns kept: every real frame attends
the padding)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class RelPositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len, bug=""):
        super().__init__()
        self.d_model, self.xscale, self.bug = d_model, math.sqrt(d_model), bug
        positions = torch.arange(max_len - 1, -max_len, -1, dtype=torch.float32).unsqueeze(1)   # (2L-1, 1)
        pe = torch.zeros(positions.size(0), d_model)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(positions * div_term)
        pe[:, 1::2] = torch.cos(positions * div_term)
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)               # (1, 2L-1, D)

    def forward(self, x):
        x = x * self.xscale
        input_len = x.size(1)
        if self.bug == "pos-window-from-start":
            return x, self.pe[:, :2 * input_len - 1]
        center_pos = self.pe.size(1) // 2 + 1
        start_pos = center_pos - input_len
        end_pos = center_pos + input_len - 1
        return x, self.pe[:, start_pos:end_pos]                                      # (1, 2T-1, D)


class RelPositionMultiHeadAttention(nn.Module):
    def __init__(self, n_head, n_feat, bug=""):
        super().__init__()
        self.d_k, self.h, self.bug = n_feat // n_head, n_head, bug
        self.s_d_k = math.sqrt(self.d_k)
        self.linear_q = nn.Linear(n_feat, n_feat)
        self.linear_k = nn.Linear(n_feat, n_feat)
        self.linear_v = nn.Linear(n_feat, n_feat)
        self.linear_out = nn.Linear(n_feat, n_feat)
        self.linear_pos = nn.Linear(n_feat, n_feat, bias=False)
        self.pos_bias_u = nn.Parameter(torch.randn(self.h, self.d_k) * 0.1)
        self.pos_bias_v = nn.Parameter(torch.randn(self.h, self.d_k) * 0.1)

    def rel_shift(self, x):
        b, h, qlen, pos_len = x.size()                                               # (b, h, t1, 2·t1-1)
        x = F.pad(x, pad=(0, 1) if self.bug == "rel-shift-pad-right" else (1, 0))    # (b, h, t1, 2·t1)
        x = x.view(b, h, -1, qlen)                                                   # (b, h, 2·t1, t1)
        return x[:, :, 1:].view(b, h, qlen, pos_len)                                 # (b, h, t1, 2·t1-1)

    def forward(self, query, key, value, mask, pos_emb):
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k)                 # (batch, time1, head, d_k)
        k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)   # (batch, head, time2, d_k)
        v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)
        p = self.linear_pos(pos_emb).view(pos_emb.size(0), -1, self.h, self.d_k)     # (1, 2·time1-1, head, d_k)
        p = p.transpose(1, 2)                                                        # (1, head, 2·time1-1, d_k)
        q_with_bias_u = (q + self.pos_bias_u).transpose(1, 2)                        # (batch, head, time1, d_k)
        q_with_bias_v = (q + self.pos_bias_v).transpose(1, 2)
        matrix_bd = torch.matmul(q_with_bias_v, p.transpose(-2, -1))                 # (batch, head, time1, 2·time1-1)
        matrix_bd = self.rel_shift(matrix_bd)
        matrix_ac = torch.matmul(q_with_bias_u, k.transpose(-2, -1))                 # (batch, head, time1, time2)
        matrix_bd = matrix_bd[:, :, :, :matrix_ac.size(-1)]                          # (batch, head, time1, time2)
        scores = (matrix_ac + matrix_bd) / self.s_d_k
        mask = mask.unsqueeze(1)                                                     # (batch, 1, time1, time2)
        scores = scores.masked_fill(mask, -10000.0)
        attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
        x = torch.matmul(attn, v)                                                    # (batch, head, time1, d_k)
        x = x.transpose(1, 2).reshape(n_batch, -1, self.h * self.d_k)                # (batch, time1, D)
        return self.linear_out(x)


class ConformerSketch(nn.Module):
    def __init__(self, d_model, n_heads, max_len=16, bug=""):
        super().__init__()
        self.bug = bug
        self.pos_enc = RelPositionalEncoding(d_model, max_len, bug)
        self.norm_self_att = nn.LayerNorm(d_model)
        self.self_attn = RelPositionMultiHeadAttention(n_heads, d_model, bug)

    def forward(self, audio_signal, length):
        audio_signal, pos_emb = self.pos_enc(audio_signal)
        max_audio_length = audio_signal.size(1)
        pad_mask = torch.arange(0, max_audio_length).expand(length.size(0), -1) < length.unsqueeze(-1)   # (B, T)
        if self.bug == "att-mask-rows-only":
            att_mask = pad_mask.unsqueeze(2).repeat([1, 1, max_audio_length])      # (B, T, T)
        else:
            att_mask = pad_mask.unsqueeze(1).repeat([1, max_audio_length, 1])      # (B, T, T)
            att_mask = torch.logical_and(att_mask, att_mask.transpose(1, 2))
        att_mask = ~att_mask
        x = self.norm_self_att(audio_signal)
        return audio_signal + self.self_attn(x, x, x, att_mask, pos_emb)            # (B, T, D)


BUGS = ("rel-shift-pad-right", "pos-window-from-start", "att-mask-rows-only")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    """Subsampled frames already at width ``D``; the longest utterance fills ``T``, the others are 2 shorter."""
    torch.manual_seed(0)
    length = torch.tensor([T] + [T - 2] * (B - 1))
    return ConformerSketch(D, H, bug=bug).eval(), (torch.randn(B, T, D), length)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
