"""reczoo/FuxiCTR issue #130 ("get_mask issue when num_heads > 1", closed; "Issues encountered in DMR, BST, DMIN,
InterHAt"): it quotes ``get_mask``'s ``attn_mask = padding_mask.unsqueeze(1).repeat(1, seq_len * self.num_heads,
1).view(-1, seq_len, seq_len)``, the ``(B*H, L, L)`` mask handed to ``nn.MultiheadAttention``. The later ``BST.py``
builds the ``(B, L, L)`` mask first (padding, the ``diag_zeros`` that keep each pad row's own key, the optional
causal band) and then repeats it per head, ``attn_mask.unsqueeze(1).repeat(1, self.num_heads, 1, 1)
.flatten(end_dim=1)``. Both orders are batch-major (block ``b * H + h``), the order ``nn.MultiheadAttention``
reads a 3-d mask in, so the quoted form is kept here as a twin that must behave as the fix; the bug is the
head-major tiling a reader of the issue would reach for.

The idiom (``BST`` with its ``BehaviorTransformer``/``TransformerBlock``): the behaviour sequence's embeddings with
the target item appended, sinusoidal position embeddings concatenated to the features, ``MultiheadAttention(
model_dim, num_heads, batch_first=True)`` given ``attn_mask`` (True = masked), residual + ``LayerNorm``, a
position-wise FFN; ``sequence_pooling`` "mean" over the unpadded positions. The first sequence left-padded by two.

Twin: ``quoted-repeat-view``: issue #130's line. Bugs: ``mask-heads-outer``: ``attn_mask.repeat(self.num_heads, 1,
1)`` (head-major, batch b's mask handed to the wrong rows when B > 1); ``padding-polarity``: ``padding_mask = x > 0``
used as "True = masked" (every real item hidden, the pads kept)."""

import sys

import numpy as np
import torch
from torch import nn

BUGS = ("mask-heads-outer", "padding-polarity")
TWINS = ("quoted-repeat-view",)
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class TransformerBlock(nn.Module):
    def __init__(self, model_dim=64, ffn_dim=64, num_heads=8):
        super().__init__()
        self.attention = nn.MultiheadAttention(model_dim, num_heads=num_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(model_dim, ffn_dim), nn.LeakyReLU(), nn.Linear(ffn_dim, model_dim))
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(model_dim), nn.LayerNorm(model_dim)

    def forward(self, x, attn_mask=None):
        attn, _ = self.attention(x, x, x, attn_mask=attn_mask)                          # b x len x dim
        s = self.layer_norm1(attn + x)
        return self.layer_norm2(self.ffn(s) + s)


class BST(nn.Module):
    def __init__(self, num_items=50, embedding_dim=16, num_heads=4, seq_len=6, bug=""):
        super().__init__()
        self.bug, self.num_heads = bug, num_heads
        self.item_emb = nn.Embedding(num_items, embedding_dim, padding_idx=0)
        pe = torch.zeros(seq_len, embedding_dim)
        position = torch.arange(0, seq_len).float().unsqueeze(1)
        div_term = torch.exp(torch.arange(0, embedding_dim, 2).float() * (-np.log(10000.0) / embedding_dim))
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
        self.position_emb = nn.Parameter(pe)                                              # len x pos_dim
        self.block = TransformerBlock(2 * embedding_dim, 2 * embedding_dim, num_heads)
        self.dnn = nn.Linear(2 * embedding_dim, 1)

    def get_mask(self, x):
        padding_mask = (x > 0) if self.bug == "padding-polarity" else (x == 0)           # b x len, True = masked
        seq_len = padding_mask.size(1)
        if self.bug == "quoted-repeat-view":
            attn_mask = padding_mask.unsqueeze(1).repeat(1, seq_len * self.num_heads, 1).view(-1, seq_len, seq_len)
            diag_zeros = ~torch.eye(seq_len, device=x.device).bool().unsqueeze(0).expand_as(attn_mask)
            return padding_mask, attn_mask & diag_zeros                                   # (b*h) x len x len
        attn_mask = padding_mask.unsqueeze(1).repeat(1, seq_len, 1)                       # b x len x len
        diag_zeros = ~torch.eye(seq_len, device=x.device).bool().unsqueeze(0).expand_as(attn_mask)
        attn_mask = attn_mask & diag_zeros
        if self.bug == "mask-heads-outer":
            return padding_mask, attn_mask.repeat(self.num_heads, 1, 1)                   # (h*b) x len x len
        return padding_mask, attn_mask.unsqueeze(1).repeat(1, self.num_heads, 1, 1).flatten(end_dim=1)

    def forward(self, click_history, item_id):                                           # b x (len-1), b
        x = torch.cat([click_history, item_id.unsqueeze(1)], dim=1)                      # b x len
        padding_mask, attn_mask = self.get_mask(x)
        seq_emb = self.item_emb(x)                                                        # b x len x emb
        seq_emb = torch.cat([seq_emb, self.position_emb.unsqueeze(0).repeat(x.size(0), 1, 1)], dim=-1)
        out = self.block(seq_emb, attn_mask=attn_mask)                                    # b x len x dim
        mask = (1 - padding_mask.float()).unsqueeze(-1)                                   # 0 for masked positions
        pooled = (out * mask).sum(dim=1) / (mask.sum(dim=1) + 1.e-12)                     # b x dim
        return torch.sigmoid(self.dnn(pooled))


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    click_history = torch.randint(1, 50, (B, T - 1))
    click_history[0, :2] = 0                                                              # left padding
    return BST(50, D // 2, H, T, bug=bug).eval(), (click_history, torch.randint(1, 50, (B,)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
