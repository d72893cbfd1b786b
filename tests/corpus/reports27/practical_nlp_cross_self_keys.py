"""keitakurita/Practical_NLP_in_PyTorch issue #1 ("Transformer - decoder block does not use encoder output for
keys and values in attention mechanism"): in ``deep_dives/transformer_from_scratch.ipynb`` the
``DecoderBlock.forward`` ran its second ("encoder-decoder") attention as ``self.attn_head(queries=att, keys=x,
values=x, mask=tgt_mask)``: keys and values from the decoder's own states, ``enc_out`` never read, so the
decoder never sees the source sentence; the fix reads ``keys=enc_out, values=enc_out`` under the source mask.

The idiom: the notebook's per-head ``AttentionHead`` (``query_tfm``/``key_tfm``/``value_tfm``: ``nn.Linear(d_model,
d_feature)``) around a ``ScaledDotProductAttention`` (``torch.bmm(q, k.transpose(1, 2)) / sqrt(d_k)``,
``masked_fill(mask == 0, -1e9)``, ``softmax(-1)``, ``torch.bmm(attn, v)``), a ``MultiHeadAttention`` that
concatenates the heads' outputs (``torch.cat(..., dim=-1)``) and projects them back (``nn.Linear(d_feature *
n_heads, d_model)``), post-norm residual blocks and a position-wise feed-forward.

Bug (source of keys): ``decoder-keys``: the cross attention reads ``keys=x, values=x`` (the decoder's states,
under the target's causal mask) instead of ``enc_out`` (the source, under its padding mask)."""

import math
import sys

import torch
from torch import nn

BUGS = ("decoder-keys",)
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)


class ScaledDotProductAttention(nn.Module):
    def forward(self, q, k, v, mask=None):
        d_k = k.size(-1)
        attn = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d_k)
        if mask is not None:
            attn = attn.masked_fill(mask == 0, -1e9)
        attn = torch.softmax(attn, dim=-1)
        return torch.bmm(attn, v)


class AttentionHead(nn.Module):
    def __init__(self, d_model, d_feature):
        super().__init__()
        self.attn = ScaledDotProductAttention()
        self.query_tfm = nn.Linear(d_model, d_feature)
        self.key_tfm = nn.Linear(d_model, d_feature)
        self.value_tfm = nn.Linear(d_model, d_feature)

    def forward(self, queries, keys, values, mask=None):
        return self.attn(self.query_tfm(queries), self.key_tfm(keys), self.value_tfm(values), mask=mask)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, d_feature, n_heads):
        super().__init__()
        self.attn_heads = nn.ModuleList([AttentionHead(d_model, d_feature) for _ in range(n_heads)])
        self.projection = nn.Linear(d_feature * n_heads, d_model)

    def forward(self, queries, keys, values, mask=None):
        x = [attn(queries, keys, values, mask=mask) for attn in self.attn_heads]
        return self.projection(torch.cat(x, dim=-1))


class DecoderBlock(nn.Module):
    def __init__(self, d_model, d_feature, n_heads, d_ff, bug=""):
        super().__init__()
        self.bug = bug
        self.masked_attn_head = MultiHeadAttention(d_model, d_feature, n_heads)
        self.attn_head = MultiHeadAttention(d_model, d_feature, n_heads)
        self.position_wise_feed_forward = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.layer_norm1 = nn.LayerNorm(d_model)
        self.layer_norm2 = nn.LayerNorm(d_model)
        self.layer_norm3 = nn.LayerNorm(d_model)

    def forward(self, x, enc_out, src_mask, tgt_mask):
        att = self.masked_attn_head(x, x, x, mask=tgt_mask)
        x = self.layer_norm1(x + att)
        if self.bug == "decoder-keys":
            att = self.attn_head(queries=x, keys=x, values=x, mask=tgt_mask)
        else:
            att = self.attn_head(queries=x, keys=enc_out, values=enc_out, mask=src_mask)
        x = self.layer_norm2(x + att)
        pos = self.position_wise_feed_forward(x)
        return self.layer_norm3(x + pos)


def build(bug="", B=2, T=6, S=5, D=32, H=4):
    torch.manual_seed(0)
    model = DecoderBlock(D, D // H, H, 2 * D, bug=bug).eval()
    lengths = torch.tensor([S] + [S - 2] * (B - 1))
    src_mask = (torch.arange(S)[None, :] < lengths[:, None]).unsqueeze(1)          # (B, 1, S)
    tgt_mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).unsqueeze(0)          # (1, T, T)
    return model, (torch.randn(B, T, D), torch.randn(B, S, D), src_mask, tgt_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
