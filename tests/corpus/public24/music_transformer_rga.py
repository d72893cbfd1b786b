"""jason9693/MusicTransformer-pytorch, ``custom/layers.py`` (2019, ``RelativeGlobalAttention``, after Huang et
al.'s Music Transformer): ``Wq``/``Wk``/``Wv`` viewed ``(B, T, h, dh)`` and ``permute(0, 2, 1, 3)``; a learned
table ``E`` of ``max_seq`` relative embeddings, the last ``len_q`` rows taken (``_get_left_embedding``);
``QE = torch.einsum('bhld,md->bhlm', [q, E])``, the upper triangle zeroed (``_qe_masking``), the skew
(``_skewing``: ``F.pad(QE, [1, 0])``, ``reshape(B, h, T + 1, T)``, the first row dropped: ``[:, :, 1:, :]``);
``logits = (q @ k.permute(0, 1, 3, 2) + Srel) / sqrt(dh)``, the look-ahead mask added as ``mask * -1e9``,
``softmax(logits, -1)``, ``@ v``, ``permute(0, 2, 1, 3).reshape(B, -1, d)``, ``fc``.

Bugs: ``merge-heads-without-permute``: ``attention.reshape(B, -1, d)`` straight from ``(B, h, T, dh)`` (the
``permute(0, 2, 1, 3)`` dropped: heads and tokens interleave); ``mask-not-causal``: the look-ahead mask built
``torch.triu(ones, diagonal=0)`` in place of ``diagonal=1`` (the repository's ``utils.get_masked_with_pad_tensor``
family of slips: each token also masks itself, a query's own position blocked)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class RelativeGlobalAttention(nn.Module):
    def __init__(self, h, d, max_seq, bug=""):
        super().__init__()
        self.h, self.d, self.dh, self.max_seq, self.bug = h, d, d // h, max_seq, bug
        self.Wq, self.Wk, self.Wv = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.fc = nn.Linear(d, d)
        self.E = nn.Parameter(torch.randn(max_seq, self.dh) * 0.1)

    def forward(self, x, mask):
        B, T, _ = x.shape
        q = self.Wq(x).view(B, T, self.h, self.dh).permute(0, 2, 1, 3)
        k = self.Wk(x).view(B, T, self.h, self.dh).permute(0, 2, 1, 3)
        v = self.Wv(x).view(B, T, self.h, self.dh).permute(0, 2, 1, 3)
        E = self.E[self.max_seq - T:]                                         # _get_left_embedding
        QE = torch.einsum("bhld,md->bhlm", [q, E])
        QE = self._qe_masking(QE)
        Srel = self._skewing(QE)
        logits = (q @ k.permute(0, 1, 3, 2) + Srel) / math.sqrt(self.dh)
        logits = logits + mask * -1e9
        attention_weights = F.softmax(logits, -1)
        attention = attention_weights @ v                                      # (B, h, T, dh)
        if self.bug == "merge-heads-without-permute":
            out = attention.reshape(B, -1, self.d)
        else:
            out = attention.permute(0, 2, 1, 3).reshape(B, -1, self.d)
        return self.fc(out)

    @staticmethod
    def _qe_masking(qe):
        T = qe.shape[-1]
        lengths = torch.arange(T - 1, -1, -1)
        mask = torch.arange(T)[None, :] >= lengths[:, None]
        return qe * mask.to(qe.dtype)

    @staticmethod
    def _skewing(t):
        padded = F.pad(t, [1, 0])
        reshaped = torch.reshape(padded, shape=[padded.size(0), padded.size(1), padded.size(-1), padded.size(-2)])
        return reshaped[:, :, 1:, :]


class MusicTransformerLayer(nn.Module):
    def __init__(self, d, h, max_seq, vocab, bug=""):
        super().__init__()
        self.bug = bug
        self.embedding = nn.Embedding(vocab, d)
        self.rga = RelativeGlobalAttention(h, d, max_seq, bug)
        self.layernorm1, self.layernorm2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)
        self.FFN = nn.Sequential(nn.Linear(d, d // 2), nn.ReLU(), nn.Linear(d // 2, d))

    def forward(self, tokens):
        T = tokens.shape[1]
        diagonal = 0 if self.bug == "mask-not-causal" else 1
        look_ahead = torch.triu(torch.ones(T, T), diagonal=diagonal)
        x = self.embedding(tokens) * math.sqrt(x_dim := self.embedding.embedding_dim)
        x = x / math.sqrt(x_dim)
        out1 = self.layernorm1(self.rga(x, look_ahead) + x)
        return self.layernorm2(out1 + self.FFN(out1))


BUGS = ("merge-heads-without-permute", "mask-not-causal")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MusicTransformerLayer(D, H, 16, 50, bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
