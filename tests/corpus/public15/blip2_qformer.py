"""salesforce/LAVIS, lavis/models/blip2_models/Qformer.py (``BertSelfAttention``, ``BertLayer`` with
``has_cross_attention``; ``Blip2Qformer`` for image-grounded text generation): learned ``query_tokens``
``[1, Q, D]`` expanded per image and concatenated before the text tokens; one self-attention over
``[queries; text]`` with a mask that keeps the queries from seeing the text (``attention_mask[:, :, :Q, Q:] = 0``)
and the text causal among itself while seeing every query; ``transpose_for_scores``: ``x.view(new_x_shape)
.permute(0, 2, 1, 3)`` with ``new_x_shape = x.size()[:-1] + (heads, head_size)``; the extended mask ``(1.0 -
mask) * -10000.0`` added to the scores; then the query slice ``hidden[:, :Q]`` cross-attends to the image
features ``[B, S, D_img]`` (``key``/``value`` from ``encoder_width``).

Bugs (argument): ``mask-query-text-swapped``: the block zeroed as ``mask[:, :, Q:, :Q] = 0`` (the text kept from
the queries instead of the queries from the text: the slip of reading the mask's rows as keys);
``cross-keys-not-permuted``: the image keys split ``view(B, heads, S, head_size)`` (``transpose_for_scores``
skipped for the cross keys, the slip of a hand-written cross branch)."""

import math
import sys

import torch
from torch import nn


class BertSelfAttention(nn.Module):
    def __init__(self, dim, heads, kv_width, bug=""):
        super().__init__()
        self.heads, self.head_size, self.bug = heads, dim // heads, bug
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(kv_width, dim), nn.Linear(kv_width, dim)

    def transpose_for_scores(self, x):                                           # (B, L, D)
        new_x_shape = x.size()[:-1] + (self.heads, self.head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden, encoder_hidden=None, mask=None):                   # (B, L, D)
        kv = hidden if encoder_hidden is None else encoder_hidden
        if self.bug == "cross-keys-not-permuted" and encoder_hidden is not None:
            key = self.key(kv).view(kv.size(0), self.heads, kv.size(1), self.head_size)
        else:
            key = self.transpose_for_scores(self.key(kv))
        value = self.transpose_for_scores(self.value(kv))
        query = self.transpose_for_scores(self.query(hidden))
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.head_size)
        if mask is not None:
            scores = scores + mask
        probs = nn.functional.softmax(scores, dim=-1)
        context = torch.matmul(probs, value).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.heads * self.head_size,))


class QformerLayer(nn.Module):
    def __init__(self, dim, heads, img_width, n_query, bug=""):
        super().__init__()
        self.n_query, self.bug = n_query, bug
        self.attention = BertSelfAttention(dim, heads, dim, bug)
        self.crossattention = BertSelfAttention(dim, heads, img_width, bug)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def self_mask(self, B, L):
        Q = self.n_query
        mask = torch.tril(torch.ones(L, L)).expand(B, 1, L, L).clone()
        mask[:, :, :, :Q] = 1
        if self.bug == "mask-query-text-swapped":
            mask[:, :, Q:, :Q] = 0
        else:
            mask[:, :, :Q, Q:] = 0
        return (1.0 - mask) * -10000.0

    def forward(self, hidden, image_embeds):                                     # (B, Q + T, D), (B, S, D_img)
        B, L, _ = hidden.shape
        hidden = self.norm1(hidden + self.attention(hidden, mask=self.self_mask(B, L)))
        queries = hidden[:, : self.n_query]
        queries = self.norm2(queries + self.crossattention(queries, image_embeds))
        return torch.cat([queries, hidden[:, self.n_query :]], dim=1)


class Qformer(nn.Module):
    def __init__(self, dim, heads, img_width, n_query, bug=""):
        super().__init__()
        self.query_tokens = nn.Parameter(torch.randn(1, n_query, dim) * 0.02)
        self.layer = QformerLayer(dim, heads, img_width, n_query, bug)

    def forward(self, text_embeds, image_embeds):                                # (B, T, D), (B, S, D_img)
        query_tokens = self.query_tokens.expand(image_embeds.shape[0], -1, -1)
        return self.layer(torch.cat([query_tokens, text_embeds], dim=1), image_embeds)


BUGS = ("mask-query-text-swapped", "cross-keys-not-permuted")
TWINS = ()
DIMS = ("B=2 T=6 S=10 D=32 H=4",)
EQUAL = {"B=2 T=6 S=10 D=32 H=4": "B=4 T=4 S=4 D=32 H=4"}
QUERIES, IMAGE_WIDTH = 3, 24


def build(bug="", B=2, T=6, S=10, D=32, H=4):
    torch.manual_seed(0)
    model = Qformer(D, H, IMAGE_WIDTH, QUERIES, bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, S, IMAGE_WIDTH))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
