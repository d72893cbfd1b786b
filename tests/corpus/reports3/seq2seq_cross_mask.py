"""Kamichanw/SeekDeeper issue #3 ("A little mistake (maybe", fixed by the maintainer: "it will be fixed at the
next version"): the Transformer walkthrough's decoder layer passed the target mask to the encoder-decoder
attention, where the source mask belongs: ``cross_attn(x, enc, enc, tgt_mask)``. The target mask is the
causal mask of the target tokens and their padding, ``(B, 1, T, T)``; the cross-attention scores are
``(B, H, T, S)``, so the mask only fits where the target and source lengths are equal, and there it hides
source tokens by the target's positions (source token j hidden from target token i < j) and leaves the
source padding unmasked.

The walkthrough's idiom (bentrevett's seq2seq): token ids in, ``nn.Embedding`` scaled by ``sqrt(D)``,
``src_mask = (src != pad)[:, None, None, :]``, ``trg_mask = trg_pad_mask & tril(ones(T, T))``,
``MultiHeadAttentionLayer`` with ``view(B, -1, H, d).permute(0, 2, 1, 3)``, ``energy.masked_fill(mask == 0,
-1e10)``, ``softmax(dim=-1)``. The model runs one encoder self-attention and one decoder layer; the second
source sentence ends in padding. S = T (the only sizes at which the bug runs).

Bug (argument): ``trg-mask-in-cross``."""

import sys

import torch
from torch import nn

BUGS = ("trg-mask-in-cross",)
TWINS = ()
DIMS = ("B=2 T=6 S=6 D=32 H=4",)
EQUAL = {"B=2 T=6 S=6 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}
PAD, VOCAB = 0, 17


class MultiHeadAttentionLayer(nn.Module):
    def __init__(self, hid_dim, n_heads):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, hid_dim // n_heads
        self.fc_q, self.fc_k, self.fc_v, self.fc_o = (nn.Linear(hid_dim, hid_dim) for _ in range(4))
        self.scale = self.head_dim ** 0.5

    def forward(self, query, key, value, mask=None):
        batch_size = query.shape[0]
        Q = self.fc_q(query).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)  # (B, H, T, d)
        K = self.fc_k(key).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)    # (B, H, S, d)
        V = self.fc_v(value).view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale                               # (B, H, T, S)
        if mask is not None:
            energy = energy.masked_fill(mask == 0, -1e10)                                          # [mask]
        attention = torch.softmax(energy, dim=-1)
        x = torch.matmul(attention, V).permute(0, 2, 1, 3).contiguous()                            # (B, T, H, d)
        return self.fc_o(x.view(batch_size, -1, self.n_heads * self.head_dim))                      # (B, T, D)


class Seq2Seq(nn.Module):
    def __init__(self, hid_dim, n_heads, bug=""):
        super().__init__()
        self.src_emb, self.trg_emb = nn.Embedding(VOCAB, hid_dim), nn.Embedding(VOCAB, hid_dim)
        self.enc_attn = MultiHeadAttentionLayer(hid_dim, n_heads)
        self.self_attn = MultiHeadAttentionLayer(hid_dim, n_heads)
        self.encoder_attention = MultiHeadAttentionLayer(hid_dim, n_heads)
        self.scale = hid_dim ** 0.5
        self.bug = bug

    def make_src_mask(self, src):
        return (src != PAD).unsqueeze(1).unsqueeze(2)                          # (B, 1, 1, S)

    def make_trg_mask(self, trg):
        trg_pad_mask = (trg != PAD).unsqueeze(1).unsqueeze(2)                  # (B, 1, 1, T)
        trg_len = trg.shape[1]
        trg_sub_mask = torch.tril(torch.ones((trg_len, trg_len))).bool()       # (T, T)
        return trg_pad_mask & trg_sub_mask                                     # (B, 1, T, T)

    def forward(self, src, trg):
        src_mask, trg_mask = self.make_src_mask(src), self.make_trg_mask(trg)
        enc_src = self.src_emb(src) * self.scale                               # (B, S, D)
        enc_src = enc_src + self.enc_attn(enc_src, enc_src, enc_src, src_mask)
        x = self.trg_emb(trg) * self.scale                                     # (B, T, D)
        x = x + self.self_attn(x, x, x, trg_mask)
        cross_mask = trg_mask if self.bug == "trg-mask-in-cross" else src_mask
        return x + self.encoder_attention(x, enc_src, enc_src, cross_mask)


def build(bug="", B=2, T=6, S=6, D=32, H=4):
    torch.manual_seed(0)
    src = torch.randint(1, VOCAB, (B, S))
    src[-1, S - 2:] = PAD                                                      # the last sentence is padded
    trg = torch.randint(1, VOCAB, (B, T))
    return Seq2Seq(D, H, bug).eval(), (src, trg)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
