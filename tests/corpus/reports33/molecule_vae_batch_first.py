"""DaoyuanLi2816/Molecule-Generator pull request #22 ("Use batch_first attention and mask padding in the
Transformer", merged): the SMILES Transformer VAE built ``nn.TransformerEncoderLayer`` (and its decoder layer)
with the default ``batch_first=False`` but fed them ``(batch, seq, embed)`` tensors, "so self-attention mixed
information *across different molecules in the batch*, and positions within a molecule were treated as
independent batch elements"; and padding was never masked, "so attention attended to ``<pad>`` tokens". The fix:
``batch_first=True`` and ``pad_mask = (x == pad_idx)`` passed as ``src_key_padding_mask`` (its test encodes two
sequences together and apart and compares them).

The idiom (the VAE's encoder; the decoder layer's fix is the same two arguments and is left out): an
``nn.Embedding`` with ``padding_idx``, a sinusoidal positional encoding buffer ``pe[:, :T]`` added to the
embeddings scaled by ``sqrt(d_model)``, an ``nn.TransformerEncoder`` of ``nn.TransformerEncoderLayer(d_model,
nhead, 4 * d_model, dropout)``, a mean over the real (unpadded) tokens, and ``fc_mu``/``fc_logvar`` to the latent
(in eval the latent is ``mu``). The second molecule ends in two pads.

Bugs: ``sequence-first-layers``: the layers built without ``batch_first=True`` and no padding mask (the code
before the PR); ``pads-unmasked``: ``batch_first=True`` but no ``src_key_padding_mask`` (the PR's second fix
alone)."""

import math
import sys

import torch
from torch import nn

BUGS = ("sequence-first-layers", "pads-unmasked")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
VOCAB, PAD, LATENT = 31, 0, 8


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)                                   # (1, max_len, D)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):                                                       # (B, T, D)
        return x + self.pe[:, : x.size(1)]


class TransformerVAEEncoder(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.bug, self.d_model = bug, d_model
        self.embedding = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(d_model)
        batch_first = bug != "sequence-first-layers"
        layer = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, dropout=0.1, batch_first=batch_first)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.fc_mu = nn.Linear(d_model, LATENT)
        self.fc_logvar = nn.Linear(d_model, LATENT)

    def forward(self, x):                                                       # x: (B, T) token ids
        pad_mask = x == PAD                                                     # (B, T)
        h = self.pos(self.embedding(x) * math.sqrt(self.d_model))               # (B, T, D)
        if self.bug:
            memory = self.encoder(h)                                            # (B, T, D)
        else:
            memory = self.encoder(h, src_key_padding_mask=pad_mask)             # (B, T, D)
        keep = (~pad_mask).unsqueeze(-1).float()                                # (B, T, 1)
        pooled = (memory * keep).sum(1) / keep.sum(1).clamp(min=1.0)            # (B, D)
        return self.fc_mu(pooled), self.fc_logvar(pooled)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    x = torch.randint(1, VOCAB, (B, T))
    x[1:, T - 2:] = PAD                                                         # the second molecule ends in pads
    return TransformerVAEEncoder(D, H, bug=bug).eval(), (x,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
