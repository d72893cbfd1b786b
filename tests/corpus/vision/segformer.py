"""huggingface/transformers, models/segformer/modeling_segformer.py (https://github.com/huggingface/
transformers/blob/main/src/transformers/models/segformer/modeling_segformer.py):
``SegformerOverlapPatchEmbeddings`` (a 7 × 7 conv of stride 4, ``flatten(2).transpose(1, 2)``),
``SegformerEfficientSelfAttention`` (keys and values from the map shortened by a strided conv:
``permute(0, 2, 1).reshape(batch, channels, height, width)``, ``sr``, ``reshape(batch, channels, -1)
.permute(0, 2, 1)``, ``transpose_for_scores``) and ``SegformerDWConv`` in the Mix-FFN
(``transpose(1, 2).view(batch, channels, height, width)``, a depthwise conv, ``flatten(2).transpose(1, 2)``).

Bug (argument): ``dwconv-view``: the Mix-FFN's map made with ``view(batch, channels, height, width)`` straight
from ``[B, N, C]``, without the transpose."""

import math
import sys

import torch
from torch import nn


class EfficientSelfAttention(nn.Module):
    def __init__(self, hidden_size=24, num_attention_heads=3, sequence_reduction_ratio=2):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = hidden_size // num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)
        self.sr = nn.Conv2d(hidden_size, hidden_size, kernel_size=sequence_reduction_ratio,
                            stride=sequence_reduction_ratio)
        self.layer_norm = nn.LayerNorm(hidden_size)

    def transpose_for_scores(self, hidden_states):
        new_shape = hidden_states.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        hidden_states = hidden_states.view(new_shape)  # (B, N, nH, hd)
        return hidden_states.permute(0, 2, 1, 3)  # (B, nH, N, hd)

    def forward(self, hidden_states, height, width):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        batch_size, seq_len, num_channels = hidden_states.shape
        hidden_states = hidden_states.permute(0, 2, 1).reshape(batch_size, num_channels, height, width)
        hidden_states = self.sr(hidden_states)  # (B, C, h', w')
        hidden_states = hidden_states.reshape(batch_size, num_channels, -1).permute(0, 2, 1)  # (B, N', C)
        hidden_states = self.layer_norm(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))  # (B, nH, N, N')
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)  # (B, nH, N, hd)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()  # (B, N, nH, hd)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)  # (B, N, C)


class MixFFN(nn.Module):
    def __init__(self, hidden=24, inner=48, bug=""):
        super().__init__()
        self.bug = bug
        self.dense1 = nn.Linear(hidden, inner)
        self.dwconv = nn.Conv2d(inner, inner, 3, 1, 1, bias=True, groups=inner)
        self.dense2 = nn.Linear(inner, hidden)

    def forward(self, hidden_states, height, width):
        hidden_states = self.dense1(hidden_states)
        batch_size, seq_len, num_channels = hidden_states.shape
        if self.bug == "dwconv-view":
            hidden_states = hidden_states.view(batch_size, num_channels, height, width)  # bug
        else:
            hidden_states = hidden_states.transpose(1, 2).view(batch_size, num_channels, height, width)
        hidden_states = self.dwconv(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)  # (B, N, C')
        return self.dense2(nn.functional.gelu(hidden_states))


class SegformerLayer(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.patch = nn.Conv2d(3, 24, kernel_size=7, stride=4, padding=3)
        self.norm0 = nn.LayerNorm(24)
        self.attention = EfficientSelfAttention()
        self.mlp = MixFFN(bug=bug)

    def forward(self, pixel_values):
        embeddings = self.patch(pixel_values)
        _, _, height, width = embeddings.shape
        embeddings = self.norm0(embeddings.flatten(2).transpose(1, 2))  # (B, N, C)
        hidden = embeddings + self.attention(embeddings, height, width)
        return hidden + self.mlp(hidden, height, width)


def build(bug=""):
    """--dims B=2,N=16,D=24,H=3 (16 × 16 pixels: a 4 × 4 map, keys from a 2 × 2 one)."""
    torch.manual_seed(0)
    return SegformerLayer(bug=bug).eval(), (torch.randn(2, 3, 16, 16),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
