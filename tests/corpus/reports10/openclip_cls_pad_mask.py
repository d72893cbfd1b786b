"""mlfoundations/open_clip PR #312 ("Add cls mask", merged: "this is supposed to add a mask to the attention
preventing the CLS token at the end of the sequence from attending to padded tokens"): CoCa's text tower
appends a learnt CLS embedding after the padded text and pools it, but attended with the causal mask alone, so
the CLS token, last in every row, read the padding tokens of the shorter texts and its embedding changed with
the batch's longest text. The fix builds ``cls_mask`` from ``text != pad_id`` and adds it to the causal mask
(``[B * H, T, T]``, ``repeat_interleave`` over the heads).

The idiom: ``token_embedding`` of ids ``[B, T - 1]`` (the second text padded with ``pad_id = 0``), the CLS
embedding concatenated last, ``positional_embedding``, a ``ResidualAttentionBlock`` around
``nn.MultiheadAttention(batch_first=True)`` with a float ``attn_mask``, ``ln_final`` of the CLS token.

Bug (argument): ``causal-mask-only``: the CLS token's row built from the causal mask alone."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("causal-mask-only",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, attn_mask):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=attn_mask)[0]
        return x + self.mlp(self.ln_2(x))


class TextTransformer(nn.Module):
    def __init__(self, dim, heads, context_length, vocab=50, pad_id=0, bug=""):
        super().__init__()
        self.heads, self.pad_id, self.bug = heads, pad_id, bug
        self.token_embedding = nn.Embedding(vocab, dim)
        self.cls_emb = nn.Parameter(torch.randn(dim))
        self.positional_embedding = nn.Parameter(torch.randn(context_length, dim) * 0.01)
        self.block = ResidualAttentionBlock(dim, heads)
        self.ln_final = nn.LayerNorm(dim)
        self.register_buffer("attn_mask", torch.full((context_length, context_length), float("-inf")).triu_(1))

    def build_cls_mask(self, text, dtype):
        cls_mask = (text != self.pad_id).unsqueeze(1)                                  # (B, 1, T - 1)
        cls_mask = F.pad(cls_mask, (0, 1, cls_mask.shape[2], 0), value=True)           # (B, T, T)
        additive_mask = torch.zeros(cls_mask.shape, dtype=dtype)
        additive_mask.masked_fill_(~cls_mask, float("-inf"))
        return torch.repeat_interleave(additive_mask, self.heads, 0)                   # (B * H, T, T)

    def forward(self, text):                                                           # (B, T - 1)
        b, seq_len = text.shape[0], text.shape[1] + 1
        x = self.token_embedding(text)                                                 # (B, T - 1, D)
        x = torch.cat([x, self.cls_emb.expand(b, 1, -1)], dim=1) + self.positional_embedding[:seq_len]
        attn_mask = self.attn_mask[:seq_len, :seq_len]
        if self.bug != "causal-mask-only":
            attn_mask = attn_mask[None] + self.build_cls_mask(text, x.dtype)
        x = self.block(x, attn_mask)
        return self.ln_final(x[:, -1])                                                 # (B, D): the CLS token


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    text = torch.randint(1, 50, (B, T - 1))
    text[1:, T - 3:] = 0                                                               # the shorter texts padded
    return TextTransformer(D, H, T, bug=bug).eval(), (text,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
