"""songyangco/GETNext issue #2 ("Question about positional encoding", open, a second user: "I have the same
confusion"): GETNext's ``PositionalEncoding`` is the PyTorch tutorial's, written for sequence-first input,
``pe`` of shape ``(max_len, 1, D)`` and ``x + pe[:x.size(0)]``, but the model feeds it batch-first
trajectories ``(B, T, D)``: ``x.size(0)`` is the batch, so trajectory b gets position b's encoding on all of
its check-ins, and the check-ins of one trajectory get no position at all. The fix reads the sequence axis:
``pe[:x.size(1)].transpose(0, 1)`` (or feeds the encoder sequence-first).

Here the encoder attention after it is written out batch-first and right (``q.view(B, T, H, d).transpose(1,
2)``, a causal ``generate_square_subsequent_mask``-style additive mask ``(T, T)``, ``softmax(dim=-1)``), so
the positions are the only slip.

Bug (argument): ``pe-on-batch``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pe-on-batch",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=50, bug=""):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))            # (max_len, 1, D)
        self.bug = bug

    def forward(self, x):                                                      # x: (B, T, D)
        if self.bug == "pe-on-batch":
            return x + self.pe[:x.size(0), :]                                  # (B, 1, D) [pe]
        return x + self.pe[:x.size(1), :].transpose(0, 1)                      # (1, T, D) [pe]


class SelfAttention(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.nhead, self.head_dim = nhead, d_model // nhead
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, attn_mask):
        B, T, D = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, self.nhead, self.head_dim).transpose(1, 2) for t in (q, k, v))   # (B, H, T, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + attn_mask                  # (B, H, T, T)
        out = F.softmax(scores, dim=-1) @ v
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))


class TransformerModel(nn.Module):
    def __init__(self, embed_size, nhead, bug=""):
        super().__init__()
        self.embed_size = embed_size
        self.pos_encoder = PositionalEncoding(embed_size, bug=bug)
        self.attn = SelfAttention(embed_size, nhead)
        self.decoder_poi = nn.Linear(embed_size, 11)

    @staticmethod
    def generate_square_subsequent_mask(sz):
        mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
        return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

    def forward(self, src):
        src_mask = self.generate_square_subsequent_mask(src.size(1))
        src = src * math.sqrt(self.embed_size)
        src = self.pos_encoder(src)
        x = src + self.attn(src, src_mask)
        return self.decoder_poi(x)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return TransformerModel(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
