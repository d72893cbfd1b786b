"""rexrex9/nlp_torchtext pull request #2 ("bug-fix:修正了Attention层中，关于解码器部分的逻辑", "fix the decoder's
logic in the Attention layer"): the tutorial's decoder computed the encoder-decoder attention with the
*encoder's* output as the queries and the decoder's states as the keys and values; the PR (after "Attention
is all you need"): the encoder output gives K and V, the decoder gives Q. The call is the tutorial's
``MultiHeadAttention(input_Q, input_K, input_V, attn_mask)``, whose residual is ``input_Q``: with the roles
swapped the decoder's stream continues from the encoder's positions. The tutorial pads source and target to
one ``max_len`` (S = T, the only sizes at which the swapped call runs).

The idiom (the nlp-tutorial Transformer the course follows): ``W_Q``/``W_K``/``W_V`` without bias,
``view(batch, -1, n_heads, d_k).transpose(1, 2)``, ``attn_mask.unsqueeze(1).repeat(1, n_heads, 1, 1)``,
``ScaledDotProductAttention`` (``scores / np.sqrt(d_k)``, ``masked_fill_(attn_mask, -1e9)``, ``Softmax(dim=-1)``),
``fc`` back to ``d_model``, ``LayerNorm(output + residual)``; ``get_attn_pad_mask(seq_q, seq_k)`` (pads of
``seq_k`` hidden, ``expand(batch, len_q, len_k)``), ``get_attn_subsequence_mask`` (``np.triu(k=1)``); the
decoder layer's masked self-attention, then the encoder-decoder attention under
``get_attn_pad_mask(dec_inputs, enc_inputs)``. The encoder output comes in as an input, with the source ids.

Bug (argument order): ``enc-as-query``."""

import sys

import numpy as np
import torch
from torch import nn

BUGS = ("enc-as-query",)
TWINS = ()
DIMS = ("B=2 T=6 S=6 D=32 H=4",)
EQUAL = {"B=2 T=6 S=6 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}
VOCAB = 23


def get_attn_pad_mask(seq_q, seq_k):
    batch_size, len_q = seq_q.size()
    batch_size, len_k = seq_k.size()
    pad_attn_mask = seq_k.data.eq(0).unsqueeze(1)                       # [batch, 1, len_k]
    return pad_attn_mask.expand(batch_size, len_q, len_k)


def get_attn_subsequence_mask(seq):
    attn_shape = [seq.size(0), seq.size(1), seq.size(1)]
    subsequence_mask = np.triu(np.ones(attn_shape), k=1)
    return torch.from_numpy(subsequence_mask).byte()


class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_k):
        super().__init__()
        self.d_k = d_k

    def forward(self, Q, K, V, attn_mask):
        scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(self.d_k)
        scores.masked_fill_(attn_mask, -1e9)
        attn = nn.Softmax(dim=-1)(scores)
        return torch.matmul(attn, V), attn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.W_Q = nn.Linear(d_model, self.d_k * n_heads, bias=False)
        self.W_K = nn.Linear(d_model, self.d_k * n_heads, bias=False)
        self.W_V = nn.Linear(d_model, self.d_k * n_heads, bias=False)
        self.fc = nn.Linear(n_heads * self.d_k, d_model, bias=False)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, input_Q, input_K, input_V, attn_mask):
        residual, batch_size = input_Q, input_Q.size(0)
        Q = self.W_Q(input_Q).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        K = self.W_K(input_K).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        V = self.W_V(input_V).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        attn_mask = attn_mask.unsqueeze(1).repeat(1, self.n_heads, 1, 1)
        context, attn = ScaledDotProductAttention(self.d_k)(Q, K, V, attn_mask)
        context = context.transpose(1, 2).reshape(batch_size, -1, self.n_heads * self.d_k)
        return self.norm(self.fc(context) + residual), attn


class Decoder(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.tgt_emb = nn.Embedding(VOCAB, d_model)
        self.pos_emb = nn.Embedding(64, d_model)
        self.dec_self_attn = MultiHeadAttention(d_model, n_heads)
        self.dec_enc_attn = MultiHeadAttention(d_model, n_heads)

    def forward(self, dec_inputs, enc_inputs, enc_outputs):
        positions = torch.arange(dec_inputs.size(1)).unsqueeze(0)
        dec_outputs = self.tgt_emb(dec_inputs) + self.pos_emb(positions)
        dec_self_attn_pad_mask = get_attn_pad_mask(dec_inputs, dec_inputs)
        dec_self_attn_subsequence_mask = get_attn_subsequence_mask(dec_inputs)
        dec_self_attn_mask = torch.gt((dec_self_attn_pad_mask + dec_self_attn_subsequence_mask), 0)
        dec_enc_attn_mask = get_attn_pad_mask(dec_inputs, enc_inputs)
        dec_outputs, _ = self.dec_self_attn(dec_outputs, dec_outputs, dec_outputs, dec_self_attn_mask)
        if self.bug == "enc-as-query":
            dec_outputs, _ = self.dec_enc_attn(enc_outputs, dec_outputs, dec_outputs, dec_enc_attn_mask)
        else:
            dec_outputs, _ = self.dec_enc_attn(dec_outputs, enc_outputs, enc_outputs, dec_enc_attn_mask)
        return dec_outputs


def build(bug="", B=2, T=6, S=6, D=32, H=4):
    torch.manual_seed(0)
    enc_inputs = torch.randint(1, VOCAB, (B, S))
    enc_inputs[1:, S - 2:] = 0                                           # the second source ends in pads
    dec_inputs = torch.randint(1, VOCAB, (B, T))
    dec_inputs[1:, T - 1:] = 0
    return Decoder(D, H, bug=bug).eval(), (dec_inputs, enc_inputs, torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
