"""dbiir/UER-py pull request #190 ("Update extract_features.py", merged; MardoPP: "fix bug that mean-pooling
includes pad embedding"): the feature extractor padded every sentence to ``seq_length`` with ``PAD_ID`` and set
``seg`` to 0 on the pads; the encoder masked the pads in its attention from ``seg``, but the sentence vector was
``output.mean(dim=1)``: the mean over all ``seq_length`` rows, pads included, so a sentence's vector depended on
how much padding its batch carried. The fix weighs the rows by ``seg > 0`` and divides by the count of real
tokens.

The idiom: UER's ``WordPosSegEmbedding`` (word + position + segment embeddings, a LayerNorm), a
``TransformerEncoder`` layer whose mask is built from ``seg`` as ``(seg > 0).unsqueeze(1).repeat(1, T, 1)
.unsqueeze(1)``, turned into ``(1 - mask) * -10000`` and added to the scores, UER's ``MultiHeadedAttention``
(``shape``/``unshape`` with ``view``/``transpose``), then the pooling. The second sentence has two pads.

Bug (pooling): ``mean-over-pads``: ``output.mean(dim=1)`` (pads averaged in)."""

import math
import sys

import torch
from torch import nn

BUGS = ("mean-over-pads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadedAttention(nn.Module):
    def __init__(self, hidden_size, heads_num):
        super().__init__()
        self.hidden_size = hidden_size
        self.heads_num = heads_num
        self.per_head_size = hidden_size // heads_num
        self.linear_layers = nn.ModuleList([nn.Linear(hidden_size, hidden_size) for _ in range(3)])
        self.final_linear = nn.Linear(hidden_size, hidden_size)

    def forward(self, key, value, query, mask):
        batch_size, seq_length, hidden_size = key.size()
        heads_num, per_head_size = self.heads_num, self.per_head_size

        def shape(x):
            return x.contiguous().view(batch_size, seq_length, heads_num, per_head_size).transpose(1, 2)

        def unshape(x):
            return x.transpose(1, 2).contiguous().view(batch_size, seq_length, hidden_size)

        query, key, value = [
            shape(layer(x)) for layer, x in zip(self.linear_layers, (query, key, value))
        ]
        scores = torch.matmul(query, key.transpose(-2, -1))
        scores = scores / math.sqrt(float(per_head_size))
        scores = scores + mask
        probs = nn.Softmax(dim=-1)(scores)
        output = unshape(torch.matmul(probs, value))
        return self.final_linear(output)


class SequenceEncoder(nn.Module):
    def __init__(self, vocab_size, hidden_size, heads_num, seq_length, bug=""):
        super().__init__()
        self.bug = bug
        self.word_embedding = nn.Embedding(vocab_size, hidden_size)
        self.position_embedding = nn.Embedding(seq_length, hidden_size)
        self.segment_embedding = nn.Embedding(3, hidden_size)
        self.layer_norm = nn.LayerNorm(hidden_size)
        self.self_attn = MultiHeadedAttention(hidden_size, heads_num)
        self.layer_norm_1 = nn.LayerNorm(hidden_size)

    def forward(self, src, seg):
        batch_size, seq_length = src.size()
        pos = torch.arange(0, seq_length, dtype=torch.long).unsqueeze(0).repeat(batch_size, 1)
        emb = self.layer_norm(self.word_embedding(src) + self.position_embedding(pos) + self.segment_embedding(seg))
        mask = (seg > 0).unsqueeze(1).repeat(1, seq_length, 1).unsqueeze(1).float()
        mask = (1.0 - mask) * -10000.0
        hidden = self.layer_norm_1(emb + self.self_attn(emb, emb, emb, mask))
        if self.bug == "mean-over-pads":
            return torch.mean(hidden, dim=1)
        seg_mask = (seg > 0).unsqueeze(-1).float()
        return torch.sum(hidden * seg_mask, dim=1) / torch.sum(seg_mask, dim=1)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    src = torch.randint(1, 50, (B, T))
    seg = torch.ones(B, T, dtype=torch.long)
    src[-1, -2:] = 0
    seg[-1, -2:] = 0
    return SequenceEncoder(50, D, H, T, bug=bug).eval(), (src, seg)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
