"""PetrochukM/PyTorch-NLP issue #2 ("Attention's softmax dimension is wrong?"): ``torchnlp.nn.Attention``
(Luong-style, one head) scores ``bmm(query, context.transpose(1, 2))`` ``(B, L_out, L_q)``, views them
``(B·L_out, L_q)`` and normalised them with ``nn.Softmax(dim=0)``: over the batch and output positions, not the
context positions; fixed to ``dim=-1``. Then ``mix = bmm(weights, context)``, ``cat((mix, query), dim=2)``,
``linear_out`` and ``tanh``. The query is the decoder's T positions, the context the encoder's S.

Bug (argument): ``softmax-dim0``."""

import sys

import torch
from torch import nn

BUGS = ("softmax-dim0",)
TWINS = ()
DIMS = ("B=2 T=3 S=6 D=32",)
EQUAL = {"B=2 T=3 S=6 D=32": "B=4 T=4 S=4 D=32"}


class Attention(nn.Module):
    def __init__(self, dimensions, bug=""):
        super().__init__()
        self.linear_in = nn.Linear(dimensions, dimensions, bias=False)
        self.linear_out = nn.Linear(dimensions * 2, dimensions, bias=False)
        self.softmax = nn.Softmax(dim=0 if bug == "softmax-dim0" else -1)
        self.tanh = nn.Tanh()

    def forward(self, query, context):
        batch_size, output_len, dimensions = query.size()
        query_len = context.size(1)
        query = query.reshape(batch_size * output_len, dimensions)
        query = self.linear_in(query)
        query = query.reshape(batch_size, output_len, dimensions)                # (B, T, D)
        attention_scores = torch.bmm(query, context.transpose(1, 2).contiguous())  # (B, T, S)
        attention_scores = attention_scores.view(batch_size * output_len, query_len)
        attention_weights = self.softmax(attention_scores)
        attention_weights = attention_weights.view(batch_size, output_len, query_len)
        mix = torch.bmm(attention_weights, context)                              # (B, T, D)
        combined = torch.cat((mix, query), dim=2)                                # (B, T, 2D)
        combined = combined.view(batch_size * output_len, 2 * dimensions)
        output = self.linear_out(combined).view(batch_size, output_len, dimensions)
        return self.tanh(output), attention_weights


def build(bug="", B=2, T=3, S=6, D=32):
    torch.manual_seed(0)
    return Attention(D, bug).eval(), (torch.randn(B, T, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
