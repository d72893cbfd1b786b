"""facebookresearch/detr, models/transformer.py (``Transformer.forward``, ``TransformerEncoderLayer.forward_post``,
``TransformerDecoderLayer.forward_post``, ``with_pos_embed``;
https://github.com/facebookresearch/detr/blob/main/models/transformer.py): the backbone's features ``(bs, c,
h, w)`` flattened ``src.flatten(2).permute(2, 0, 1)`` to sequence-first ``(HW, bs, c)``, the sine position
``pos_embed`` the same way, ``query_embed.unsqueeze(1).repeat(1, bs, 1)``, ``mask.flatten(1)`` as the
key padding mask, ``tgt = torch.zeros_like(query_embed)``; ``nn.MultiheadAttention`` (sequence-first) with
the positions added to the queries and keys only: ``q = k = self.with_pos_embed(src, pos)``, ``self_attn(q,
k, value=src, key_padding_mask=...)``, in the decoder ``multihead_attn(query=with_pos_embed(tgt,
query_pos), key=with_pos_embed(memory, pos), value=memory, key_padding_mask=memory_key_padding_mask)``;
post-norm residuals; the decoder's output ``hs.transpose(1, 2)``.

Bugs (argument): ``src-view-no-permute``: ``src.reshape(h * w, bs, c)`` of ``(bs, c, h, w)`` features (the
fold to sequence-first without its permute: rows mix channels, pixels and images); ``mask-not-flattened-right``: the
padding mask ``mask.transpose(1, 2).flatten(1)`` (column-major: it hides the wrong pixels of each image);
``memory-mask-as-queries``: the memory's padding mask given to the decoder's self-attention keys
(``tgt_key_padding_mask``) reshaped to the queries' count (``mask[:, :num_queries]``): the object queries'
own keys hidden by the image's padding."""

import sys

import torch
from torch import nn

BUGS = ("src-view-no-permute", "mask-not-flattened-right", "memory-mask-as-queries")
TWINS = ()
DIMS = ("B=2 D=32 Hp=3 Wp=5 T=6 H=4",)
EQUAL = {"B=2 D=32 Hp=3 Wp=5 T=6 H=4": "B=4 D=32 Hp=4 Wp=4 T=4 H=4"}


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=64):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.0)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def with_pos_embed(self, tensor, pos):
        return tensor if pos is None else tensor + pos

    def forward(self, src, src_key_padding_mask=None, pos=None):
        q = k = self.with_pos_embed(src, pos)
        src2 = self.self_attn(q, k, value=src, key_padding_mask=src_key_padding_mask)[0]  # (HW, B, D)
        src = self.norm1(src + src2)
        src2 = self.linear2(torch.relu(self.linear1(src)))
        return self.norm2(src + src2)


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=64):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.0)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.0)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def with_pos_embed(self, tensor, pos):
        return tensor if pos is None else tensor + pos

    def forward(self, tgt, memory, tgt_key_padding_mask=None, memory_key_padding_mask=None, pos=None, query_pos=None):
        q = k = self.with_pos_embed(tgt, query_pos)
        tgt2 = self.self_attn(q, k, value=tgt, key_padding_mask=tgt_key_padding_mask)[0]  # (T, B, D)
        tgt = self.norm1(tgt + tgt2)
        tgt2 = self.multihead_attn(query=self.with_pos_embed(tgt, query_pos),
                                   key=self.with_pos_embed(memory, pos),
                                   value=memory, key_padding_mask=memory_key_padding_mask)[0]  # (T, B, D)
        tgt = self.norm2(tgt + tgt2)
        tgt2 = self.linear2(torch.relu(self.linear1(tgt)))
        return self.norm3(tgt + tgt2)


class Transformer(nn.Module):
    def __init__(self, d_model=32, nhead=4, num_queries=5, bug=""):
        super().__init__()
        self.bug = bug
        self.encoder = TransformerEncoderLayer(d_model, nhead)
        self.decoder = TransformerDecoderLayer(d_model, nhead)
        self.query_embed = nn.Embedding(num_queries, d_model)

    def forward(self, src, mask, pos_embed):
        bs, c, h, w = src.shape
        if self.bug == "src-view-no-permute":
            src = src.reshape(h * w, bs, c)  # bug: (HW, B, D) read without the permute
        else:
            src = src.flatten(2).permute(2, 0, 1)  # (HW, B, D)
        pos_embed = pos_embed.flatten(2).permute(2, 0, 1)  # (HW, B, D)
        query_embed = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)  # (T, B, D)
        if self.bug == "mask-not-flattened-right":
            mask = mask.transpose(1, 2).flatten(1)  # bug: column-major pixels
        else:
            mask = mask.flatten(1)  # (B, HW)
        tgt = torch.zeros_like(query_embed)
        memory = self.encoder(src, src_key_padding_mask=mask, pos=pos_embed)
        tgt_mask = mask[:, : query_embed.shape[0]] if self.bug == "memory-mask-as-queries" else None
        hs = self.decoder(tgt, memory, tgt_key_padding_mask=tgt_mask, memory_key_padding_mask=mask,
                          pos=pos_embed, query_pos=query_embed)  # (T, B, D)
        return hs.transpose(0, 1)  # (B, N, D)


def build(bug="", B=2, T=6, Hp=3, Wp=5, D=32, H=4):  # noqa: N803
    """--dims 'B=2 D=32 Hp=3 Wp=5 T=6 H=4': backbone features (B, D, Hp, Wp), a padding mask (B, Hp, Wp)
    whose last image is padded in its last column (at B = 1 nothing is padded), sine positions (B, D, Hp, Wp)
    and T object queries."""
    torch.manual_seed(0)
    mask = torch.zeros(B, Hp, Wp, dtype=torch.bool)
    if B > 1:
        mask[-1, :, -1] = True
    pos = torch.randn(1, D, Hp, Wp).expand(B, D, Hp, Wp)
    return Transformer(D, H, T, bug).eval(), (torch.randn(B, D, Hp, Wp), mask, pos)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
