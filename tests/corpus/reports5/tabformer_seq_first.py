"""IBM/TabFormer PR #14 ("bug fix: set the correct ordering of dimensions in the input tensor", merged): the
tabular transformer handed ``nn.TransformerEncoder`` (whose ``nn.MultiheadAttention`` takes ``(S, N, E)``:
sequence first, in the PyTorch 1.6 the project used, before ``batch_first``) its rows as ``(N, S, E)``, batch
first: every field of a row attended to the same field of the other rows in the batch, and the rows' own
fields never met. The fix transposes to ``(S, N, E)`` before the encoder and back after it, as the following
layers expect the batch first.

TabFormer's idiom: per-field embeddings concatenated into one row vector and viewed as ``(N, fields, E)``,
``nn.TransformerEncoderLayer(E, nhead, dim_feedforward)`` stacked in ``nn.TransformerEncoder``, a Linear head
over the flattened row.

Bug (argument): ``batch-first``: the rows handed to the sequence-first encoder as they are."""

import sys

import torch
from torch import nn

BUGS = ("batch-first",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class TabRowEncoder(nn.Module):
    def __init__(self, num_fields, field_hidden, nhead, bug=""):
        super().__init__()
        self.bug = bug
        layer = nn.TransformerEncoderLayer(field_hidden, nhead, dim_feedforward=2 * field_hidden, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.lin_proj = nn.Linear(num_fields * field_hidden, field_hidden)

    def forward(self, inputs_embeds):
        n, s, e = inputs_embeds.shape                                       # (N, fields, E)
        if self.bug == "batch-first":
            hidden = self.transformer_encoder(inputs_embeds)                # [encoder]
        else:
            hidden = self.transformer_encoder(inputs_embeds.transpose(0, 1)).transpose(0, 1)   # [encoder]
        return self.lin_proj(hidden.contiguous().view(n, s * e))            # (N, E)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return TabRowEncoder(T, D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
