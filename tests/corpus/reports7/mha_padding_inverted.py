"""pytorch/pytorch issue #27968 ("MultiheadAttention incorrectly handles mask", labelled high priority): the
reporter built ``key_padding_mask`` with fastNLP's ``seq_len_to_mask([5, 3, 1, 0], max_len=5)``, True for the
*real* tokens, and handed it to ``nn.MultiheadAttention``, which reads True as "ignore this key": each sentence
attended to its padding only (the weights printed in the issue: sentence 2, three real tokens, puts all its
weight on keys 0-2 … of the inverted mask; an all-real row fully masked gives NaN). The answer was the
documented meaning (pytorch PR #39321 then spelled it out: "the positions with the value of True will be
ignored"); the fix on the user's side is ``key_padding_mask=~mask``.

The idiom: an encoder layer around ``nn.MultiheadAttention(batch_first=True)`` with a lengths tensor turned
into a mask ``arange(T)[None] < lengths[:, None]`` (True for real tokens), residual and ``LayerNorm``.

Bug (argument): ``keep-mask-as-padding``: the keep-mask passed as ``key_padding_mask`` unchanged."""

import sys

import torch
from torch import nn

BUGS = ("keep-mask-as-padding",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, src, seq_len):
        mask = torch.arange(src.shape[1])[None, :] < seq_len[:, None]                  # (B, T): True = real
        key_padding_mask = mask if self.bug == "keep-mask-as-padding" else ~mask       # [padding]
        out, _ = self.self_attn(src, src, src, key_padding_mask=key_padding_mask)      # [mha]
        return self.norm(src + out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    seq_len = torch.tensor([T] + [T - 2] * (B - 1))
    return EncoderLayer(D, H, bug).eval(), (torch.randn(B, T, D), seq_len)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
