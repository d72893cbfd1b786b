"""EderSantana/seya issue #32 ("Why is the backward output reversed across first axes in the bidirectional
RNN?"): seya's ``Bidirectional`` wrapper ran a forward and a backward recurrent layer and re-reversed the
backward one's output sequence with ``Xb = Xb[::-1]`` before joining the two, but in Keras the first axis is the
batch, so the backward states were reversed across the batch (sentence ``i`` got the backward states of
sentence ``B - 1 - i``), not in time. The maintainer agreed: ``Xb[:, ::-1]``.

The idiom, in PyTorch: a bidirectional recurrent encoder built from two ``GRU(batch_first=True)`` layers (the
backward one run on ``x.flip(1)``, its states flipped back), the two halves concatenated on the features, then a
multi-head self-attention block over the encoded tokens (``q/k/v`` ``Linear``, ``view(B, T, H, d).transpose(1,
2)``, ``softmax(-1)``, merge, ``out``).

Bug (argument): ``flip-batch``: the backward states re-reversed along the batch, ``Xb.flip(0)``."""

import sys

import torch
from torch import nn

BUGS = ("flip-batch",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class Bidirectional(nn.Module):
    def __init__(self, dim, bug=""):
        super().__init__()
        self.forward_rnn = nn.GRU(dim, dim // 2, batch_first=True)
        self.backward_rnn = nn.GRU(dim, dim // 2, batch_first=True)
        self.bug = bug

    def forward(self, x):                                                      # (B, T, D)
        xf, _ = self.forward_rnn(x)
        xb, _ = self.backward_rnn(x.flip(1))                                   # the sequence read backwards
        xb = xb.flip(0) if self.bug == "flip-batch" else xb.flip(1)            # [flip]
        return torch.cat([xf, xb], dim=-1)                                     # (B, T, D)


class BiRNNSelfAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.encoder = Bidirectional(dim, bug)
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))

    def split(self, x):
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)     # (B, H, T, d)

    def forward(self, x):
        h = self.encoder(x)
        q, k, v = self.split(self.q(h)), self.split(self.k(h)), self.split(self.v(h))
        weights = torch.softmax(q @ k.transpose(-2, -1) / self.head_dim ** 0.5, dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.out(context)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return BiRNNSelfAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
