"""mlfoundations/open_clip PR #312 ("Add cls mask", merged: "this is supposed to add a mask to the attention
preventing the CLS token at the end of the sequence from attending to padded tokens"): CoCa's text tower appends
a learned CLS embedding *after* the padded text and pools it, but the tower masked with the causal triangle
alone; causal attention keeps every text token off the padding to its right, yet the CLS, last, read every
padding token of the shorter captions, so a caption's embedding changed with the batch's longest one (the PR:
"we noticed perf changes a bit post this change"). The fix builds ``cls_mask`` from ``text != pad_id``,
pads it to ``(B, T+1, T+1)`` so that only the CLS row is restricted, and adds it to the causal mask per head.

The idiom: open_clip's ``TextTransformer`` with ``embed_cls`` (``token_embedding``, ``positional_embedding``
on the text, ``cat`` of the CLS at the end, ``nn.MultiheadAttention`` blocks with ``attn_mask`` of
``(B * heads, T+1, T+1)`` from ``repeat_interleave(heads, 0)``, ``ln_final``, the pooled ``x[:, -1]``),
batch first, the second caption right-padded by two.

Bugs (argument): ``no-cls-mask``: the causal mask alone; ``cls-mask-first``: the PR's mask as merged,
``F.pad(cls_mask, (1, 0, T, 0))``: its padding column prepended, a mask for a CLS placed *first*, while the CLS is
appended last, so each key reads the padding flag of the token before it, the CLS's own key is hidden and one
padding key stays visible (open_clip issue #549, "current implementation of ``build_cls_mask()`` produces
``cls_mask`` for [CLS] being as the first token. But in CoCa, [CLS] is the end token"; PR #1084 added the
``correct_cls_mask`` option that pads on the right, ``(0, 1, T, 0)``, this file's correct form; issue #1113).
Added in round 14, when the engine first named the mask's key axis ``1+T`` against the keys' ``T+1``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-cls-mask", "cls-mask-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x, attn_mask):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=attn_mask)[0]         # [attn]
        return x + self.mlp(self.ln_2(x))


class TextTransformer(nn.Module):
    def __init__(self, vocab, width, heads, context_length=6, pad_id=0, bug=""):
        super().__init__()
        self.heads, self.pad_id, self.bug = heads, pad_id, bug
        self.token_embedding = nn.Embedding(vocab, width)
        self.positional_embedding = nn.Parameter(torch.randn(context_length, width) * 0.01)
        self.cls_emb = nn.Parameter(torch.randn(width) * 0.01)
        self.block = ResidualAttentionBlock(width, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, width) * width ** -0.5)
        self.register_buffer("attn_mask", self.build_causal_mask(context_length + 1), persistent=False)

    @staticmethod
    def build_causal_mask(n):
        mask = torch.empty(n, n).fill_(float("-inf"))
        return mask.triu_(1)

    def build_cls_mask(self, text, cast_dtype):
        cls_mask = (text != self.pad_id).unsqueeze(1)                                   # (B, 1, T)
        if self.bug == "cls-mask-first":
            cls_mask = F.pad(cls_mask, (1, 0, cls_mask.shape[2], 0), value=True)       # (B, 1+T, 1+T)
        else:
            cls_mask = F.pad(cls_mask, (0, 1, cls_mask.shape[2], 0), value=True)       # (B, T+1, T+1)
        additive_mask = torch.empty(cls_mask.shape, dtype=cast_dtype)
        additive_mask.fill_(0)
        additive_mask.masked_fill_(~cls_mask, float("-inf"))
        return torch.repeat_interleave(additive_mask, self.heads, 0)                   # [cls-mask]

    def forward(self, text):                                                            # (B, T)
        seq_len = text.shape[1] + 1
        x = self.token_embedding(text) + self.positional_embedding[: seq_len - 1]
        x = torch.cat([x, self.cls_emb.expand(x.shape[0], 1, -1)], dim=1)             # (B, T+1, D)
        attn_mask = self.attn_mask[:seq_len, :seq_len]
        if self.bug != "no-cls-mask":
            attn_mask = attn_mask[None, :seq_len, :seq_len] + self.build_cls_mask(text, x.dtype)
        x = self.block(x, attn_mask)
        pooled = self.ln_final(x)[:, -1]                                                # [pool] (B, D)
        return pooled @ self.text_projection


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    text = torch.randint(1, 50, (B, T))
    text[1:, T - 2:] = 0                                                                # right padding
    return TextTransformer(50, D, H, context_length=T, bug=bug).eval(), (text,)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
