"""terrifyzhao/text_matching issue #2 ("esim模型的pooling操作出错":
"Pooling阶段，对BiLSTM的输出做pooling操作，应该是在句子长度的这个维度，也就是维度1上，不是维度2"): the
ESIM model's pooling step averaged and maxed the composition BiLSTM's outputs ``(batch, seq_len,
2·hidden)`` over axis 2, each word's features, instead of axis 1, the words: each sentence became one
number per word, and the classifier read the words' positions as features. The reporter's fix pools
over axis 1.

ESIM's idiom (the project's Keras model, written here in PyTorch): a shared embedding and input BiLSTM,
soft alignment ``e = a @ bᵀ``, ``softmax(e, 2) @ b`` and ``softmax(e, 1)ᵀ @ a``, the enhancement
``[a; ã; a − ã; a ⊙ ã]`` projected, a composition BiLSTM, mean and max pooling of both sentences
concatenated, an MLP. Both sentences have ``seq_len`` words (the project pads to one length).

Bug (argument): ``pool-features``: the pooling over axis 2."""

import sys

import torch
from torch import nn

BUGS = ("pool-features",)
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


class ESIM(nn.Module):
    def __init__(self, vocab, dim, seq_len, classes=2, bug=""):
        super().__init__()
        self.bug = bug
        self.embedding = nn.Embedding(vocab, dim)
        self.input_lstm = nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)
        self.projection = nn.Linear(4 * dim, dim)
        self.composition = nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)
        width = 4 * seq_len if bug == "pool-features" else 4 * dim
        self.mlp = nn.Sequential(nn.Linear(width, dim), nn.Tanh(), nn.Linear(dim, classes))

    def pool(self, x):
        axis = 2 if self.bug == "pool-features" else 1
        return torch.cat([x.mean(dim=axis), x.max(dim=axis).values], dim=-1)   # [pool]

    def forward(self, premise, hypothesis):
        a, _ = self.input_lstm(self.embedding(premise))                    # (B, La, D)
        b, _ = self.input_lstm(self.embedding(hypothesis))                 # (B, Lb, D)
        e = torch.matmul(a, b.transpose(1, 2))                             # (B, La, Lb)
        a_tilde = torch.matmul(torch.softmax(e, dim=2), b)                 # (B, La, D)
        b_tilde = torch.matmul(torch.softmax(e, dim=1).transpose(1, 2), a)  # (B, Lb, D)
        m_a = self.projection(torch.cat([a, a_tilde, a - a_tilde, a * a_tilde], dim=-1))
        m_b = self.projection(torch.cat([b, b_tilde, b - b_tilde, b * b_tilde], dim=-1))
        v_a, _ = self.composition(m_a)
        v_b, _ = self.composition(m_b)
        return self.mlp(torch.cat([self.pool(v_a), self.pool(v_b)], dim=-1))


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    premise, hypothesis = torch.randint(0, 50, (B, T)), torch.randint(0, 50, (B, T))
    return ESIM(50, D, T, bug=bug).eval(), (premise, hypothesis)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
