"""facebookresearch/fairseq issue #318 ("key_padding_mask is not used in the attention in fconv_self_att.py",
acknowledged by the maintainer: the key padding mask was added to the repository after that model): the
decoder's attention over the encoder's output never received the encoder's padding mask, so every target
position also read the padded source frames.

Written in fairseq's ``MultiheadAttention`` idiom: time-first ``(T, B, C)``, ``q_proj(query) * scaling``,
``view(T, B·H, d).transpose(0, 1)``, ``bmm`` scores ``(B·H, T, S)``, the key padding mask applied on the
``view(B, H, T, S)`` with ``masked_fill(mask.unsqueeze(1).unsqueeze(2), -inf)``, ``softmax(dim=-1)``, ``bmm``
with the values, ``transpose(0, 1).contiguous().view(T, B, C)``, ``out_proj``. The decoder layer runs a causal
self-attention over the T target tokens, then the encoder attention over S source frames, of which the
second sequence's last two are padding.

Bug (argument): ``no-encoder-mask``: the layer calls the encoder attention without
``key_padding_mask=encoder_padding_mask``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-encoder-mask",)
TWINS = ()
DIMS = ("B=2 T=4 S=6 D=32 H=4",)
EQUAL = {"B=2 T=4 S=6 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj, self.v_proj, self.q_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None):
        tgt_len, bsz, embed_dim = query.size()
        src_len = key.size(0)
        q = self.q_proj(query) * self.scaling
        k, v = self.k_proj(key), self.v_proj(value)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)  # (B*H, T, d)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)       # (B*H, S, d)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))                                         # (B*H, T, S)
        if attn_mask is not None:
            attn_weights += attn_mask.unsqueeze(0)
        if key_padding_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_probs = F.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_probs, v)                                                        # (B*H, T, d)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)                # (T, B, C)
        return self.out_proj(attn)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.self_attn = MultiheadAttention(embed_dim, num_heads)
        self.encoder_attn = MultiheadAttention(embed_dim, num_heads)
        self.bug = bug

    def forward(self, x, encoder_out, encoder_padding_mask):
        dim = x.size(0)
        future_mask = torch.triu(torch.full((dim, dim), float("-inf")), 1)                    # (T, T)
        x = x + self.self_attn(x, x, x, attn_mask=future_mask)
        mask = None if self.bug == "no-encoder-mask" else encoder_padding_mask
        return x + self.encoder_attn(x, encoder_out, encoder_out, key_padding_mask=mask)


def build(bug="", B=2, T=4, S=6, D=32, H=4):
    torch.manual_seed(0)
    encoder_padding_mask = torch.zeros(B, S, dtype=torch.bool)
    encoder_padding_mask[-1, S - 2:] = True        # the last source sentence ends in two padding frames
    inputs = (torch.randn(T, B, D), torch.randn(S, B, D), encoder_padding_mask)
    return TransformerDecoderLayer(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
