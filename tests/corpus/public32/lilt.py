"""transformers, src/transformers/models/lilt/modeling_lilt.py (v4.46, ``LiltSelfAttention``, ``LiltLayoutEmbeddings``):
SCUT-DLVCLab's Language-independent Layout Transformer. Two streams: text ``(B, T, D)`` and layout
``(B, T, D / 4)`` (``channel_shrink_ratio = 4``), each with its own q/k/v split by ``transpose_for_scores``
(``view(B, T, H, d).permute(0, 2, 1, 3)``, the layout heads ``d / 4`` wide). The bi-directional attention
complementation: both streams' scores ``(B, H, T, T)`` are computed, each scaled, then each stream adds the other's
(``text + layout``), the padding mask ``(1 - mask[:, None, None, :]) * min`` is added, ``softmax(dim=-1)``, and each
stream's probabilities read its own values; contexts ``permute(0, 2, 1, 3).reshape(B, T, -1)``. The layout stream
starts from four box coordinates embedded and projected to ``D / 4``.

Bugs: ``layout-scores-transposed``: the layout scores added as ``layout.transpose(-1, -2)`` (a natural slip when
the cross-stream sum is written ``k @ q^T``: keys and queries swapped); ``layout-context-no-permute``: the layout
context reshaped ``(B, T, D / 4)`` straight from ``(B, H, T, d / 4)`` (the merge slip)."""

import math
import sys

import torch
from torch import nn


class LiltSelfAttention(nn.Module):
    def __init__(self, dim, heads, shrink=4, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.shrink, self.bug = heads, dim // heads, shrink, bug
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.layout_query = nn.Linear(dim // shrink, dim // shrink)
        self.layout_key = nn.Linear(dim // shrink, dim // shrink)
        self.layout_value = nn.Linear(dim // shrink, dim // shrink)

    def transpose_for_scores(self, x, r=1):
        new_x_shape = x.size()[:-1] + (self.num_heads, self.head_dim // r)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, layout_inputs, attention_mask):
        layout_value = self.transpose_for_scores(self.layout_value(layout_inputs), r=self.shrink)
        layout_key = self.transpose_for_scores(self.layout_key(layout_inputs), r=self.shrink)
        layout_query = self.transpose_for_scores(self.layout_query(layout_inputs), r=self.shrink)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(self.query(hidden_states))

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        layout_attention_scores = torch.matmul(layout_query, layout_key.transpose(-1, -2))
        tmp_attention_scores = attention_scores / math.sqrt(self.head_dim)
        tmp_layout_attention_scores = layout_attention_scores / math.sqrt(self.head_dim // self.shrink)
        if self.bug == "layout-scores-transposed":
            tmp_layout_attention_scores = tmp_layout_attention_scores.transpose(-1, -2)
        attention_scores = tmp_attention_scores + tmp_layout_attention_scores
        layout_attention_scores = tmp_layout_attention_scores + tmp_attention_scores

        layout_attention_probs = nn.functional.softmax(layout_attention_scores + attention_mask, dim=-1)
        layout_context = torch.matmul(layout_attention_probs, layout_value)
        if self.bug != "layout-context-no-permute":
            layout_context = layout_context.permute(0, 2, 1, 3).contiguous()
        layout_context = layout_context.reshape(layout_context.shape[0], -1, layout_value.shape[-1] * self.num_heads)

        attention_probs = nn.functional.softmax(attention_scores + attention_mask, dim=-1)
        context = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        context = context.view(context.size()[:-2] + (self.num_heads * self.head_dim,))
        return context, layout_context


class LiltModel(nn.Module):
    def __init__(self, vocab, dim, heads, bug=""):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, dim, padding_idx=1)
        self.position_embeddings = nn.Embedding(64, dim)
        self.box_embeddings = nn.Embedding(1024, dim // 8)
        self.box_linear = nn.Linear(4 * (dim // 8), dim // 4)
        self.box_position_embeddings = nn.Embedding(64, dim // 4)
        self.norm, self.layout_norm = nn.LayerNorm(dim), nn.LayerNorm(dim // 4)
        self.attention = LiltSelfAttention(dim, heads, 4, bug)
        self.output, self.layout_output = nn.Linear(dim, dim), nn.Linear(dim // 4, dim // 4)

    def forward(self, input_ids, bbox, attention_mask):
        bsz, seq_len = input_ids.shape
        positions = torch.arange(seq_len)[None].expand(bsz, seq_len)
        text = self.norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        boxes = self.box_embeddings(bbox).flatten(2)                         # (B, T, 4 e)
        layout = self.layout_norm(self.box_linear(boxes) + self.box_position_embeddings(positions))
        extended = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        context, layout_context = self.attention(text, layout, extended)
        return self.output(context) + text, self.layout_output(layout_context) + layout


BUGS = ("layout-scores-transposed", "layout-context-no-permute")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    input_ids = torch.randint(2, 40, (B, T))
    bbox = torch.randint(0, 1000, (B, T, 4))
    bbox[..., 2:] = torch.maximum(bbox[..., 2:], bbox[..., :2])             # x1 >= x0, y1 >= y0
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, -2:] = 0
    input_ids[0, -2:] = 1
    return LiltModel(40, D, H, bug).eval(), (input_ids, bbox, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
