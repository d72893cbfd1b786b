"""line/lighthouse pull request #77 ("Fix 3D attn_mask head/batch layout in T2V/V2T cross-attention (repeat →
repeat_interleave)", merged; komatta-san: "``nn.MultiheadAttention`` expects a 3D ``attn_mask`` of shape
``(N * num_heads, L, S)`` indexed as ``batch_idx * num_heads + head_idx``. The mask is built with
``.repeat(nhead, 1, 1)``, which tiles instead: ``[M0, M1, M0, M1]`` rather than the expected ``[M0, M0, M1,
M1]``. Heads then attend using the wrong sample's padding mask"): the text-to-video cross-attention layer of
the moment-retrieval models (CG-DETR, QD-DETR, TR-DETR) masks the padded text tokens per sample with a 3D mask.

The idiom: sequence-first ``nn.MultiheadAttention(d_model, nhead)`` on ``[T, B, D]`` video queries and
``[S, B, D]`` text keys/values, the text padding mask ``[B, S]`` (True = pad) turned into ``[B, T, S]`` by
``unsqueeze(1).expand``, then ``repeat_interleave(nhead, dim=0)``, a residual and a LayerNorm. S = 5 text
tokens; the second sample has two pads.

Bug (mask layout): ``repeat-tiles``: ``.repeat(nhead, 1, 1)``."""

import sys

import torch
from torch import nn

BUGS = ("repeat-tiles",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class T2VEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.nhead = nhead
        self.bug = bug
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.0)
        self.norm1 = nn.LayerNorm(d_model)

    def forward(self, src_vid, src_txt, txt_pad_mask):
        T, B = src_vid.shape[0], src_vid.shape[1]
        attn_mask = txt_pad_mask.unsqueeze(1).expand(B, T, txt_pad_mask.shape[1])
        if self.bug == "repeat-tiles":
            attn_mask = attn_mask.repeat(self.nhead, 1, 1)
        else:
            attn_mask = attn_mask.repeat_interleave(self.nhead, dim=0)
        src2 = self.self_attn(src_vid, src_txt, src_txt, attn_mask=attn_mask)[0]
        return self.norm1(src_vid + src2)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    txt_pad_mask = torch.zeros(B, 5, dtype=torch.bool)
    txt_pad_mask[-1, -2:] = True
    return T2VEncoderLayer(D, H, bug=bug).eval(), (torch.randn(T, B, D), torch.randn(5, B, D), txt_pad_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
