"""DiffPoseTalk/DiffPoseTalk issue #20 ("Critical bug in the implementation of the PositionalEncoding class"):
``PositionalEncoding.forward`` adds ``self.pe[:, x.shape[1], :]``, the encoding of the single position T (an
index), to every frame, where ``self.pe[:, :x.shape[1], :]`` (a slice, one position per frame) was meant: the
denoiser gets the same vector at every frame and no positions at all.

The idiom (DiffPoseTalk's ``PositionalEncoding`` and its denoising decoder, ported to a hand-written torch
decoder layer): the sinusoidal table ``pe`` (``[1, max_len, d_model]`` buffer), the motion frames projected to
``d_model``, the encoding added, a causal self-attention over the frames and a cross-attention over the audio
features with the alignment mask ``enc_dec_mask(T, S, frame_width=2)`` (frame i sees audio steps ``2i`` and
``2i + 1``), each ``[B, H, T, d]`` with ``masked_fill(mask, -inf)``, ``Linear`` projections, post-norm
residuals, and the motion head.

Bug (argument): ``pe-index``: the encoding read ``self.pe[:, x.shape[1], :]``."""

import math
import sys

import torch
from torch import nn

BUGS = ("pe-index",)
TWINS = ()
DIMS = ("B=2 T=6 S=12 D=32 H=4",)
EQUAL = {"B=2 T=6 S=12 D=32 H=4": "B=4 T=4 S=8 D=32 H=4"}


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=600, bug=""):
        super().__init__()
        self.dropout, self.bug = nn.Dropout(p=dropout), bug
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))                                     # (1, max_len, D)

    def forward(self, x):
        if self.bug == "pe-index":
            x = x + self.pe[:, x.shape[1], :]                                            # (B, T, D)
        else:
            x = x + self.pe[:, :x.shape[1], :]                                           # (B, T, D)
        return self.dropout(x)


def enc_dec_mask(T, S, frame_width=2, expansion=0):
    mask = torch.ones(T, S)
    for i in range(T):
        mask[i, max(0, (i - expansion) * frame_width):(i + expansion + 1) * frame_width] = 0
    return mask == 1                                                                     # (T, S): True = hidden


class Attention(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.nhead, self.head_dim = nhead, d_model // nhead
        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, memory, mask):
        b, t, _ = query.shape
        s = memory.shape[1]
        q = self.q_proj(query).view(b, t, self.nhead, self.head_dim).transpose(1, 2)    # (B, H, T, d)
        k = self.k_proj(memory).view(b, s, self.nhead, self.head_dim).transpose(1, 2)   # (B, H, S, d)
        v = self.v_proj(memory).view(b, s, self.nhead, self.head_dim).transpose(1, 2)   # (B, H, S, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)                      # (B, H, T, S)
        scores = scores.masked_fill(mask, float("-inf"))
        out = scores.softmax(dim=-1) @ v                                                 # (B, H, T, d)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1))                     # (B, T, D)


class Denoiser(nn.Module):
    def __init__(self, motion_dim, feature_dim, nhead, bug=""):
        super().__init__()
        self.motion_proj = nn.Linear(motion_dim, feature_dim)
        self.PE = PositionalEncoding(feature_dim, bug=bug)
        self.self_attn = Attention(feature_dim, nhead)
        self.cross_attn = Attention(feature_dim, nhead)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(feature_dim) for _ in range(3))
        self.ff = nn.Sequential(nn.Linear(feature_dim, 2 * feature_dim), nn.GELU(), nn.Linear(2 * feature_dim,
                                                                                                  feature_dim))
        self.motion_head = nn.Linear(feature_dim, motion_dim)

    def forward(self, motion, audio_feat):
        t, s = motion.shape[1], audio_feat.shape[1]
        x = self.PE(self.motion_proj(motion))                                            # (B, T, D)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)             # (T, T)
        x = self.norm1(x + self.self_attn(x, x, causal))
        x = self.norm2(x + self.cross_attn(x, audio_feat, enc_dec_mask(t, s)))
        x = self.norm3(x + self.ff(x))
        return self.motion_head(x)


def build(bug="", B=2, T=6, S=12, D=32, H=4):
    torch.manual_seed(0)
    model = Denoiser(motion_dim=10, feature_dim=D, nhead=H, bug=bug)
    return model.eval(), (torch.randn(B, T, 10), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
