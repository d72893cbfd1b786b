"""keras-team/keras-io pull request #1904 ("Correct minor issue in the guide 'Understanding masking &
padding'"): the guide's ``TemporalSoftmax`` is introduced as "a layer that computes a softmax over the time
dimension (axis 1) of an input sequence", but its code sums the exponentials over ``axis=-1``; after
``Dense(1)`` that is an axis of size one, so every unmasked weight is exactly 1 and the "attention" over the
time steps is a plain sum. The PR sums over ``axis=1`` ("you'd want the weights across the sequence to sum to
1, and not the embeddings for each time-step").

The idiom (the guide's example, written here in torch as the module would be): ``Embedding(vocab, D,
mask_zero=True)``, ``Dense(1)`` scores ``(B, T, 1)``, the hand-written masked softmax (``exp`` of the scores
times the float mask ``expand_dims(mask, -1)``, divided by the masked sum), then the weights pool the
embedded tokens over time into ``(B, D)`` for a classifier head. Token id 0 is padding; the second sequence
ends in padding.

Bug (axis): ``sum-over-last-axis``: the masked sum taken over ``axis=-1`` (the size-1 score axis) instead of
the time axis."""

import sys

import torch
from torch import nn

BUGS = ("sum-over-last-axis",)
TWINS = ()
DIMS = ("B=3 T=6 D=32",)
VOCAB, CLASSES = 10, 5


class TemporalSoftmax(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.bug = bug

    def forward(self, inputs, mask):
        broadcast_float_mask = mask.float().unsqueeze(-1)                      # (B, T, 1)
        inputs_exp = torch.exp(inputs) * broadcast_float_mask                  # (B, T, 1)
        axis = -1 if self.bug == "sum-over-last-axis" else 1
        inputs_sum = torch.sum(inputs_exp * broadcast_float_mask, dim=axis, keepdim=True)
        return inputs_exp / inputs_sum                                         # (B, T, 1)


class TemporalPooling(nn.Module):
    def __init__(self, vocab, dim, classes, bug=""):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.score = nn.Linear(dim, 1)
        self.softmax = TemporalSoftmax(bug=bug)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids):
        mask = ids != 0                                                        # (B, T), mask_zero=True
        x = self.embedding(ids)                                                # (B, T, D)
        weights = self.softmax(self.score(x), mask)                            # (B, T, 1)
        pooled = torch.sum(weights * x, dim=1)                                 # (B, D)
        return self.head(pooled)


def build(bug="", B=3, T=6, D=32):
    torch.manual_seed(0)
    ids = torch.randint(1, VOCAB, (B, T))
    ids[1:, T - 2:] = 0
    return TemporalPooling(VOCAB, D, CLASSES, bug=bug).eval(), (ids,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
