"""ssw-nlp-study-group/nlp_study pull request #2 ("修复softmax轴数bug", "fix the softmax axis bug"): the study
group's GRU seq2seq with dot attention keeps PyTorch's default sequence-first layout, so the encoder outputs
are ``(seq_len, batch, hidden)`` and the scores ``(seq_len, batch)``; the attention weights were taken with
``F.softmax(scores, dim=1)``, a softmax over the *batch* (axis 1), where the letters of the sequence are axis 0
(the PR: "axis 0 is the letter sequence, axis 1 is the batch; the softmax should run along axis 0").

The idiom: ``nn.Embedding`` and ``nn.GRU(emb, hidden)`` (sequence-first), a decoder step that embeds one token
``(1, batch)``, runs its GRU cell from the encoder's last state, scores each encoder output by a dot product
with the decoder state (``torch.sum(hidden * encoder_outputs, dim=2)``), softmaxes, weights and sums the
encoder outputs over the sequence, concatenates the context with the GRU output and projects to the vocabulary.

Bug (softmax axis): ``softmax-over-batch``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("softmax-over-batch",)
TWINS = ()
DIMS = ("B=3 T=6 D=32",)
VOCAB = 29


class Encoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden)

    def forward(self, src):                                  # src: (seq_len, batch)
        outputs, hidden = self.gru(self.embedding(src))      # (seq_len, batch, hidden), (1, batch, hidden)
        return outputs, hidden


class AttnDecoder(nn.Module):
    def __init__(self, vocab, hidden, bug=""):
        super().__init__()
        self.bug = bug
        self.embedding = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden)
        self.concat = nn.Linear(hidden * 2, hidden)
        self.out = nn.Linear(hidden, vocab)

    def attention(self, hidden, encoder_outputs):
        scores = torch.sum(hidden * encoder_outputs, dim=2)                    # (seq_len, batch)
        if self.bug == "softmax-over-batch":
            return F.softmax(scores, dim=1)
        return F.softmax(scores, dim=0)

    def forward(self, token, last_hidden, encoder_outputs):
        embedded = self.embedding(token)                                        # (1, batch, hidden)
        rnn_output, hidden = self.gru(embedded, last_hidden)                    # (1, batch, hidden)
        attn_weights = self.attention(rnn_output, encoder_outputs)              # (seq_len, batch)
        context = torch.sum(attn_weights.unsqueeze(2) * encoder_outputs, dim=0)  # (batch, hidden)
        concat_output = torch.tanh(self.concat(torch.cat((rnn_output.squeeze(0), context), dim=1)))
        return F.log_softmax(self.out(concat_output), dim=1), hidden


class Seq2Seq(nn.Module):
    def __init__(self, vocab, hidden, bug=""):
        super().__init__()
        self.encoder = Encoder(vocab, hidden)
        self.decoder = AttnDecoder(vocab, hidden, bug=bug)

    def forward(self, src, token):
        encoder_outputs, hidden = self.encoder(src)
        return self.decoder(token, hidden, encoder_outputs)


def build(bug="", B=3, T=6, D=32):
    torch.manual_seed(0)
    src = torch.randint(1, VOCAB, (T, B))
    token = torch.randint(1, VOCAB, (1, B))
    return Seq2Seq(VOCAB, D, bug=bug).eval(), (src, token)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
