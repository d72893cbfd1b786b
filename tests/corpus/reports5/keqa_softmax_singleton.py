"""DEEP-PolyU/KEQA_WSDM19 issue #2 ("Attention Weight Bug in Embedding"; xhuang31: "Yes. You are right."):
``embedding.py`` scored every (word, LSTM state) pair of the flattened question ``(seq_len·batch, ·)`` with
``self.attn`` (a Linear to one score) and took ``F.softmax(scores, dim=1)``, a softmax over an axis of size
one: every weight was 1.0, and the "attention" summed the states unweighed. The maintainer's proposed fix,
``dim=0``, normalises over ``seq_len·batch``: the words of every question of the batch compete in one
softmax. The softmax belongs over each question's own words: scores viewed ``(seq_len, batch)``, softmax
over ``seq_len``.

KEQA's idiom: sequence-first ``nn.LSTM(bidirectional=True)`` over embedded words ``(seq_len, batch, D)``,
``x.view(-1, x.size(2))`` and ``outputs.view(-1, outputs.size(2))`` flattened, ``torch.cat((x, outputs), 1)``,
``self.attn`` then ``nn.Tanh``-free scores, the weighted states summed over the words, ``self.nonlinear``
and a Linear to the embedding.

Bugs (argument): ``softmax-singleton``: the softmax over the score's own axis of size one;
``softmax-flat``: the proposed fix, one softmax over all words of the batch."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-singleton", "softmax-flat")
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


class EmbedVector(nn.Module):
    def __init__(self, words_dim, hidden_size, embed_dim, bug=""):
        super().__init__()
        self.bug = bug
        self.lstm = nn.LSTM(words_dim, hidden_size, bidirectional=True)
        self.attn = nn.Linear(words_dim + 2 * hidden_size, 1)
        self.nonlinear = nn.Tanh()
        self.hidden2tag = nn.Linear(2 * hidden_size, embed_dim)

    def forward(self, x):
        seq_len, batch = x.size(0), x.size(1)
        outputs, _ = self.lstm(x)                                           # (seq_len, batch, 2*hidden)
        flat_x = x.view(-1, x.size(2))                                      # (seq_len*batch, words_dim)
        flat_out = outputs.view(-1, outputs.size(2))                        # (seq_len*batch, 2*hidden)
        scores = self.attn(torch.cat((flat_x, flat_out), 1))                # (seq_len*batch, 1)
        if self.bug == "softmax-singleton":
            attn_weights = F.softmax(scores, dim=1).view(seq_len, batch, 1)  # [softmax]
        elif self.bug == "softmax-flat":
            attn_weights = F.softmax(scores, dim=0).view(seq_len, batch, 1)  # [softmax]
        else:
            attn_weights = F.softmax(scores.view(seq_len, batch, 1), dim=0)  # [softmax]
        attn_applied = (attn_weights * outputs).sum(dim=0)                  # (batch, 2*hidden)
        return self.hidden2tag(self.nonlinear(attn_applied))                # (batch, embed)


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return EmbedVector(D, D // 2, D, bug).eval(), (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
