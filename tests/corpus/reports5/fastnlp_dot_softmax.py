"""FudanNLP/fastNLP issue #254 ("encoder模块DotAttention类中softmax的bug"; xuyige: "这里一般来说作为Transformer的
DotAttention大部分情况应该是三维张量。后续会修改为-1"): ``fastNLP.modules.encoder.attention.DotAttention`` made its
softmax ``nn.Softmax(dim=2)``, right for the three-axis scores ``(B, T, S)`` it was written for, but
``MultiHeadAttention`` calls it on the four-axis scores ``(B, H, T, S)`` of its heads, where axis 2 is the
queries: each key's column was normalised over the queries, and the keys were never weighed against one
another. The fix: ``nn.Softmax(dim=-1)``.

fastNLP's idiom: ``q_in``/``k_in``/``v_in`` Linears, ``view(batch, sq, n_head, d_k).transpose(1, 2)``, a
``DotAttention`` module scaling ``matmul(Q, K.transpose(-1, -2))`` by ``sqrt(key_size)``, the padding mask
``mask_out`` filled with ``-1e9``, dropout, ``matmul`` with ``V``, ``transpose(1, 2).contiguous().view``,
``out`` Linear.

Bug (argument): ``softmax-dim2``: the softmax over axis 2 of the heads' scores."""

import math
import sys

import torch
from torch import nn

BUGS = ("softmax-dim2",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class DotAttention(nn.Module):
    def __init__(self, key_size, value_size, dropout=0.0, bug=""):
        super().__init__()
        self.key_size, self.value_size = key_size, value_size
        self.scale = math.sqrt(key_size)
        self.drop = nn.Dropout(dropout)
        self.softmax = nn.Softmax(dim=2 if bug == "softmax-dim2" else -1)    # [softmax]

    def forward(self, Q, K, V, mask_out=None):
        output = torch.matmul(Q, K.transpose(-1, -2)) / self.scale          # (B, H, T, S)
        if mask_out is not None:
            output.masked_fill_(mask_out, -1e9)
        output = self.softmax(output)                                       # [softmax]
        output = self.drop(output)
        return torch.matmul(output, V)                                      # (B, H, T, d_v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bug=""):
        super().__init__()
        self.n_head, self.d_k = n_head, d_model // n_head
        self.q_in = nn.Linear(d_model, d_model)
        self.k_in = nn.Linear(d_model, d_model)
        self.v_in = nn.Linear(d_model, d_model)
        self.attention = DotAttention(self.d_k, self.d_k, dropout, bug)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, Q, K, V, atte_mask_out=None):
        batch, sq, _ = Q.size()
        sk = K.size(1)
        q = self.q_in(Q).view(batch, sq, self.n_head, self.d_k).transpose(1, 2)   # (B, H, T, d_k)
        k = self.k_in(K).view(batch, sk, self.n_head, self.d_k).transpose(1, 2)
        v = self.v_in(V).view(batch, sk, self.n_head, self.d_k).transpose(1, 2)
        if atte_mask_out is not None:
            atte_mask_out = atte_mask_out[:, None, :, :]                    # (B, 1, 1, S)
        atte = self.attention(q, k, v, atte_mask_out)                       # (B, H, T, d_k)
        atte = atte.transpose(1, 2).contiguous().view(batch, sq, -1)        # (B, T, D)
        return self.out(atte)


class Encoder(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.atte = MultiHeadAttention(d_model, n_head, bug=bug)

    def forward(self, x, seq_mask):
        pad = seq_mask.eq(0)[:, None, :]                                    # (B, 1, T): True at pads
        return self.atte(x, x, x, pad)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    seq_mask = torch.ones(B, T, dtype=torch.long)
    seq_mask[-1, -2:] = 0                                                   # the last row padded by 2
    return Encoder(D, H, bug).eval(), (torch.randn(B, T, D), seq_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
