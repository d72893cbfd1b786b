"""jamesmullenbach/caml-mimic issue #13 ("padding, softmax, embeddings"; ka-bu: "All the texts in a batch are
padded, but the input to the softmax function is not masked. Hence, this implementation also assigns
positive attentions to padding tokens, right?"; later: "fixing the embedding of the padding tokens does not
change much, but masking the softmax input does"; datduong: explicitly truncating each sample changed the
results by 3-4%): CAML's per-label attention took its softmax over every position of the padded batch, so
each label's document vector averaged the convolution's outputs at the pads of the shorter notes too.

The idiom: ``ConvAttnPool`` (an ``nn.Embedding``, ``Conv1d`` over the word axis with ``padding=k // 2``,
``tanh``, the label-wise attention ``alpha = softmax(U.weight.matmul(x.transpose(1, 2)), dim=2)`` of shape
``(B, Y, T)``, ``m = alpha.matmul(x)``, the final per-label scores ``final.weight.mul(m).sum(dim=2) +
final.bias``). The correct twin fills the pads' scores with ``-inf`` before the softmax (the fix the report
asks for); the second note of the batch has two pads.

Bug (mask): ``pads-attended``: the softmax over the label scores at every position, pads included."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("pads-attended",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 Y=5",)


class ConvAttnPool(nn.Module):
    def __init__(self, Y, vocab, embed_size, num_filter_maps, kernel_size=3, bug=""):
        super().__init__()
        self.bug = bug
        self.embed = nn.Embedding(vocab, embed_size, padding_idx=0)
        self.conv = nn.Conv1d(embed_size, num_filter_maps, kernel_size=kernel_size, padding=kernel_size // 2)
        self.U = nn.Linear(num_filter_maps, Y)
        self.final = nn.Linear(num_filter_maps, Y)

    def forward(self, x, lengths_mask):
        x = self.embed(x)                                                               # (B, T, E)
        x = x.transpose(1, 2)
        x = torch.tanh(self.conv(x).transpose(1, 2))                                    # (B, T, F)
        scores = self.U.weight.matmul(x.transpose(1, 2))                                # (B, Y, T)
        if self.bug != "pads-attended":
            scores = scores.masked_fill(lengths_mask[:, None, :] == 0, float("-inf"))
        alpha = F.softmax(scores, dim=2)
        m = alpha.matmul(x)                                                             # (B, Y, F)
        return self.final.weight.mul(m).sum(dim=2).add(self.final.bias)                 # (B, Y)


def build(bug="", B=2, T=6, D=32, Y=5):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -2:] = 0                                                                   # right padding
    ids = torch.randint(1, 50, (B, T)).masked_fill(mask == 0, 0)
    return ConvAttnPool(Y, 50, D, D, bug=bug).eval(), (ids, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
