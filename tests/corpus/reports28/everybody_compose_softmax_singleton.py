"""tsunrise/everybody-compose pull request #53 ("fix attention rnn": "fix the bug in the softmax dimension"):
``DeepBeatsAttentionRNN.compute_attention`` scored each (decoder state, encoder step) pair with
``attn2 = nn.Linear(embed_dim, 1)`` into ``(batch_size, seq_len, 1)`` and normalised it with
``nn.Softmax(dim = 2)``, a softmax over that axis of size one: every weight is 1.0 and the context is the plain
sum of the encoder states. The softmax belongs over the encoder steps (``dim = 1``).

The idiom: a bidirectional ``nn.LSTM(2, embed_dim, batch_first=True)`` encoder over the beat features, an
``nn.Embedding`` of the previous note, Bahdanau-style concat attention (the decoder state permuted to batch-first
and ``repeat(1, seq_len, 1)``, ``torch.concat`` with the encoder output, ``attn1`` + LeakyReLU, ``attn2``), the
weights viewed ``(batch_size, 1, seq_len)`` into ``torch.bmm`` with the encoder output, the context concatenated
with the note embedding into a residual ``concat_fc``, a decoder ``nn.LSTM`` step, the note logits; two steps
decoded (teacher forcing).

Bug (softmax axis): ``softmax-singleton``: ``nn.Softmax(dim = 2)`` over the score's own axis of size one."""

import sys

import torch
from torch import nn

BUGS = ("softmax-singleton",)
TWINS = ()
DIMS = ("B=3 T=6 D=32",)
#: the equal-size reading: at B = 2 the beat features' width (2) is the batch's size, and nothing names the input
EQUAL = {DIMS[0]: "B=2 T=6 D=32"}


class DeepBeatsAttentionRNN(nn.Module):
    def __init__(self, num_notes, embed_dim, hidden_dim, bug=""):
        super().__init__()
        self.encode_lstm = nn.LSTM(2, embed_dim, batch_first=True, bidirectional=True)
        self.note_embedding = nn.Embedding(num_notes, embed_dim)
        self.attn1 = nn.Linear(embed_dim * 2 + hidden_dim, embed_dim)
        self.attn1_activation = nn.LeakyReLU()
        self.attn2 = nn.Linear(embed_dim, 1)
        self.attn2_activation = nn.Softmax(dim=2 if bug == "softmax-singleton" else 1)
        self.concat_fc = nn.Linear(embed_dim * 3, embed_dim * 3)
        self.concat_activation = nn.LeakyReLU()
        self.decode_lstm = nn.LSTM(embed_dim * 3, hidden_dim, batch_first=True)
        self.notes_output = nn.Linear(hidden_dim, num_notes)

    def compute_attention(self, encode_output, hidden):
        batch_size, seq_len, _ = encode_output.shape
        hidden = hidden.permute(1, 0, 2)
        hidden = hidden.repeat(1, seq_len, 1)                               # (batch_size, seq_len, hidden_dim)
        concat = torch.concat((hidden, encode_output), dim=-1)
        attn = self.attn1_activation(self.attn1(concat))
        attn = self.attn2_activation(self.attn2(attn))                      # (batch_size, seq_len, 1)
        attn = attn.view(batch_size, 1, seq_len)
        return torch.bmm(attn, encode_output)                               # (batch_size, 1, 2 * embed_dim)

    def decode(self, encode_output, y_prev, hidden):
        h, c = hidden
        context = self.compute_attention(encode_output, h)
        X = torch.concat((context, self.note_embedding(y_prev)), dim=-1)
        X = self.concat_activation(self.concat_fc(X)) + X
        X, (h, c) = self.decode_lstm(X, (h, c))
        return self.notes_output(X), (h, c)

    def forward(self, x, y_prev):
        batch_size = x.shape[0]
        h1 = torch.zeros(2, batch_size, self.encode_lstm.hidden_size)
        c1 = torch.zeros(2, batch_size, self.encode_lstm.hidden_size)
        h2 = torch.zeros(1, batch_size, self.decode_lstm.hidden_size)
        c2 = torch.zeros(1, batch_size, self.decode_lstm.hidden_size)
        encode_output, _ = self.encode_lstm(x, (h1, c1))
        outputs = []
        for t in range(y_prev.shape[1]):
            output, (h2, c2) = self.decode(encode_output, y_prev[:, t:t + 1], (h2, c2))
            outputs.append(output)
        return torch.cat(outputs, dim=1)


def build(bug="", B=3, T=6, D=32):
    torch.manual_seed(0)
    model = DeepBeatsAttentionRNN(40, D, D, bug=bug).eval()
    return model, (torch.randn(B, T, 2), torch.randint(0, 40, (B, 2)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
