"""alecwangcq/show-attend-and-tell issue #6 ("Wrong dimension in torch.sum for Attention Layer", closed): in the
soft attention over the encoder's image regions, the attention-weighted encoder features were summed over the
wrong axis: ``(encoder_out * alpha.unsqueeze(2)).sum(...)`` must reduce the regions (giving one ``encoder_dim``
context vector per image), while the reported line reduced the feature axis, giving one number per region
(``batch x regions``) instead of ``batch x encoder_dim``.

The idiom (the show-attend-and-tell PyTorch ports): an ``Attention`` module with ``encoder_att`` and
``decoder_att`` linears into an attention width, ``full_att`` to one score per region, ``relu(att1 +
att2.unsqueeze(1))``, ``softmax(dim=1)`` over the regions, the weighted sum of the regions' features as the
context. T is the number of image regions (14×14 in the
paper), D the encoder's feature width, the decoder's hidden width D too.

Bug (argument): ``sum-over-features``: the weighted features summed over the feature axis (``dim=2``) instead
of the regions (``dim=1``); with regions as many as features the context keeps its shape."""

import sys

import torch
from torch import nn

BUGS = ("sum-over-features",)
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


class Attention(nn.Module):
    def __init__(self, encoder_dim, decoder_dim, attention_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)
        self.full_att = nn.Linear(attention_dim, 1)
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, encoder_out, decoder_hidden):
        att1 = self.encoder_att(encoder_out)                                      # (B, P, A)
        att2 = self.decoder_att(decoder_hidden)                                   # (B, A)
        att = self.full_att(self.relu(att1 + att2.unsqueeze(1))).squeeze(2)       # (B, P)
        alpha = self.softmax(att)                                                 # (B, P)
        if self.bug == "sum-over-features":
            context = (encoder_out * alpha.unsqueeze(2)).sum(dim=2)               # [bug] (B, P)
        else:
            context = (encoder_out * alpha.unsqueeze(2)).sum(dim=1)               # (B, E)
        return context, alpha


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    model = Attention(D, D, D // 2, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
