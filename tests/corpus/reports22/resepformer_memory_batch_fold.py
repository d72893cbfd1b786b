"""speechbrain/speechbrain pull request #1811 ("Fix input dimension for memory transformer (RE-Sepformer)";
z-wony: "If batch_size is greater than 1, current memory transformer calculates long-term dependency about all
batch sequences. This commit fixes to calculate independently between batch. Before: 1, BS, D -> Changed: B, S,
D is input to mem_model"): RE-SepFormer summarises each chunk of a mixture into one memory vector and runs an
inter-chunk ("memory") transformer over the chunk summaries. The summaries of all utterances were laid out as one
sequence ``[1, B*S, D]``, so the memory transformer attended across the utterances of the batch; the fix feeds
``[B, S, D]``.

The idiom: intra-chunk output ``[B, D, K, S]`` (here K = 3 frames per chunk, S = T chunks), the chunk summary
``mean(dim=2)``, ``permute(0, 2, 1)`` to ``[B, S, D]``, the memory model a batch-first
``nn.TransformerEncoderLayer`` (its fused MHA at H heads), and the memory broadcast back over the chunk's frames
(``unsqueeze(2)``) and added.

Bug (batch folded into tokens): ``batch-in-sequence``: ``mem.reshape(1, B * S, D)`` into the memory model and
``.reshape(B, S, D)`` back."""

import sys

import torch
from torch import nn

BUGS = ("batch-in-sequence",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MemLayer(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.bug = bug
        self.mem_model = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model,
                                                    dropout=0.0, batch_first=True)

    def forward(self, x):
        B, D, K, S = x.shape
        mem = x.mean(dim=2).permute(0, 2, 1)  # B, S, D
        if self.bug == "batch-in-sequence":
            mem = self.mem_model(mem.reshape(1, B * S, D)).reshape(B, S, D)
        else:
            mem = self.mem_model(mem)
        mem = mem.permute(0, 2, 1).unsqueeze(2)  # B, D, 1, S
        return x + mem


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MemLayer(D, H, bug=bug).eval(), (torch.randn(B, D, 3, T),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
