"""keon/seq2seq PR #6 ("Non linearity after attention", merged; fixes issue #3) and its review (CuriousG102:
"this softmax does not make sense. It computes softmax along the batch dimension..."): the PR put
``F.softmax(self.attn(torch.cat([hidden, encoder_outputs], 2)))`` into ``Attention.score``, a softmax with no
``dim`` on the three-axis energies ``[B, T, H]``: torch's implicit choice for three axes is axis 0, the
batch, so each feature of each source step was normalised across the sentences of the batch. (As merged
the PR also called ``F.relu(attn_energies, dim=1)``, which raises; this file keeps the softmax alone, the
part the review found wrong.) The code before the PR is the correct twin: ReLU energies, ``v·energy``
scores, ``F.softmax(attn_energies, dim=1)`` over the source steps.

keon/seq2seq's idiom: sequence-first GRUs, ``Attention(hidden_size)`` with ``self.attn`` a Linear over
``[hidden; encoder_output]`` and ``self.v`` a parameter, ``hidden.repeat(timestep, 1, 1).transpose(0, 1)``,
``encoder_outputs.transpose(0, 1)`` ``[B*T*H]``, ``torch.bmm(v, energy)`` ``[B*1*T]``, the context
``attn_weights.bmm(encoder_outputs.transpose(0, 1))``.

Bug (argument): ``softmax-energy-batch``: the review's softmax over the batch of the energies."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-energy-batch",)
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


class Attention(nn.Module):
    def __init__(self, hidden_size, bug=""):
        super().__init__()
        self.hidden_size, self.bug = hidden_size, bug
        self.attn = nn.Linear(hidden_size * 2, hidden_size)
        self.v = nn.Parameter(torch.rand(hidden_size))

    def forward(self, hidden, encoder_outputs):
        timestep = encoder_outputs.size(0)
        h = hidden.repeat(timestep, 1, 1).transpose(0, 1)                   # [B*T*H]
        encoder_outputs = encoder_outputs.transpose(0, 1)                   # [B*T*H]
        attn_energies = self.score(h, encoder_outputs)                      # [B*T]
        return F.softmax(attn_energies, dim=1).unsqueeze(1)                 # [B*1*T]

    def score(self, hidden, encoder_outputs):
        if self.bug == "softmax-energy-batch":
            energy = F.softmax(self.attn(torch.cat([hidden, encoder_outputs], 2)))   # [B*T*H] [energy]
        else:
            energy = F.relu(self.attn(torch.cat([hidden, encoder_outputs], 2)))      # [B*T*H] [energy]
        energy = energy.transpose(1, 2)                                     # [B*H*T]
        v = self.v.repeat(encoder_outputs.size(0), 1).unsqueeze(1)          # [B*1*H]
        return torch.bmm(v, energy).squeeze(1)                              # [B*T]


class Decoder(nn.Module):
    def __init__(self, hidden_size, bug=""):
        super().__init__()
        self.attention = Attention(hidden_size, bug)
        self.gru = nn.GRU(hidden_size * 2, hidden_size)
        self.out = nn.Linear(hidden_size * 2, hidden_size)

    def forward(self, embedded, last_hidden, encoder_outputs):
        attn_weights = self.attention(last_hidden[-1], encoder_outputs)     # [B*1*T]
        context = attn_weights.bmm(encoder_outputs.transpose(0, 1))         # [B*1*H]
        context = context.transpose(0, 1)                                   # [1*B*H]
        output, hidden = self.gru(torch.cat([embedded, context], 2), last_hidden)
        return self.out(torch.cat([output.squeeze(0), context.squeeze(0)], 1)), hidden


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    embedded, last_hidden = torch.randn(1, B, D), torch.randn(1, B, D)
    return Decoder(D, bug).eval(), (embedded, last_hidden, torch.randn(T, B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
