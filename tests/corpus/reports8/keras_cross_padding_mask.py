"""keras-team/keras-io PR #1046 ("Fix masks in English-to-Spanish translation example", merged): the
``TransformerDecoder`` built its cross-attention mask from the *target* sequence's padding mask (the decoder's own
inputs, broadcast along the query axis) and never received the source's mask; the encoder's padding positions
were attended to, and the target's padding hid keys of the source by position. The fix passes
``encoder_input_mask`` and masks the cross-attention's keys with it.

The idiom (ported to torch): an encoder layer over the source with its key padding mask, a decoder layer with
causal self-attention and cross-attention over the encoder's output, each attention ``[B, H, T, d]`` with an
additive ``-1e9`` mask, ``Linear`` projections. Source and target share the length T; the source rows have 2
and 1 padding positions, the target rows 1 and 3.

Bug (argument): ``target-mask-for-cross``: the cross-attention masks its keys (source tokens) with the target's
padding mask."""

import sys

import torch
from torch import nn

BUGS = ("target-mask-for-cross",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.query, self.key, self.value, self.out = (nn.Linear(embed_dim, embed_dim) for _ in range(4))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)             # (B, H, T, d)

    def forward(self, query, value, mask):
        q, k, v = self.split(self.query(query)), self.split(self.key(value)), self.split(self.value(value))
        scores = q @ k.transpose(-1, -2) / self.head_dim ** 0.5                         # (B, H, Tq, Tk)
        scores = scores + (1.0 - mask) * -1e9                                           # [mask]
        out = scores.softmax(dim=-1) @ v                                                # (B, H, Tq, d)
        b, _, t, _ = out.shape
        return self.out(out.transpose(1, 2).reshape(b, t, -1))                         # (B, Tq, D)


class Seq2Seq(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.enc_attn = MultiHeadAttention(embed_dim, num_heads)
        self.self_attn = MultiHeadAttention(embed_dim, num_heads)
        self.cross_attn = MultiHeadAttention(embed_dim, num_heads)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(embed_dim) for _ in range(3))

    def forward(self, src, src_mask, tgt, tgt_mask):
        enc_mask = src_mask[:, None, None, :].float()                                   # (B, 1, 1, S)
        enc = self.norm1(src + self.enc_attn(src, src, enc_mask))
        t = tgt.shape[1]
        causal = torch.tril(torch.ones(t, t))                                           # (T, T)
        dec_mask = causal[None, None] * tgt_mask[:, None, None, :].float()             # (B, 1, T, T)
        x = self.norm2(tgt + self.self_attn(tgt, tgt, dec_mask))
        keys_mask = tgt_mask if self.bug == "target-mask-for-cross" else src_mask
        cross_mask = keys_mask[:, None, None, :].float()                                # (B, 1, 1, S)
        return self.norm3(x + self.cross_attn(x, enc, cross_mask))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    src_len = torch.tensor([T - 2, T - 1] * B)[:B]
    tgt_len = torch.tensor([T - 1, T - 3] * B)[:B]
    src_mask = torch.arange(T)[None, :] < src_len[:, None]                             # (B, S): True = real
    tgt_mask = torch.arange(T)[None, :] < tgt_len[:, None]                             # (B, T)
    inputs = (torch.randn(B, T, D), src_mask, torch.randn(B, T, D), tgt_mask)
    return Seq2Seq(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
