"""huggingface/transformers, src/transformers/models/glpn/modeling_glpn.py (v4.46, ``GLPNOverlapPatchEmbeddings``,
``GLPNEfficientSelfAttention``, ``GLPNLayer``): GLPN's hierarchical encoder (Segformer's): an overlapping
``Conv2d`` patch embedding ``flatten(2).transpose(1, 2)``, efficient self-attention whose keys and values come
from a spatially reduced sequence: the states ``permute(0, 2, 1).reshape(B, C, Hs, Ws)``, a strided ``Conv2d``
(``sr``, ``sr_ratio``), ``reshape(B, C, -1).permute(0, 2, 1)``, ``LayerNorm``; heads by ``view`` +
``permute(0, 2, 1, 3)``; ``softmax(-1)``; ``permute(0, 2, 1, 3).view(B, N, C)``.

Bugs: ``sr-reshape-without-permute``: the states ``(B, N, C)`` ``reshape(B, C, Hs, Ws)``ed straight, without the
``permute(0, 2, 1)`` (the natural slip; pixels and channels mixed before the reduction conv);
``reduced-back-without-permute``: the reduced map ``(B, C, h, w)`` ``reshape(B, -1, C)``ed without
``permute(0, 2, 1)`` (keys built from channels read as positions)."""

import math
import sys

import torch
from torch import nn


class GLPNEfficientSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, sequence_reduction_ratio, bug=""):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = hidden_size // num_attention_heads
        self.all_head_size, self.bug = hidden_size, bug
        self.query, self.key = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.sr_ratio = sequence_reduction_ratio
        self.sr = nn.Conv2d(hidden_size, hidden_size, kernel_size=sequence_reduction_ratio,
                            stride=sequence_reduction_ratio)
        self.layer_norm = nn.LayerNorm(hidden_size)

    def transpose_for_scores(self, hidden_states):
        new_shape = hidden_states.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return hidden_states.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, height, width):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        batch_size, seq_len, num_channels = hidden_states.shape
        if self.bug == "sr-reshape-without-permute":
            hidden_states = hidden_states.reshape(batch_size, num_channels, height, width)
        else:
            hidden_states = hidden_states.permute(0, 2, 1).reshape(batch_size, num_channels, height, width)
        hidden_states = self.sr(hidden_states)
        if self.bug == "reduced-back-without-permute":
            hidden_states = hidden_states.reshape(batch_size, -1, num_channels)
        else:
            hidden_states = hidden_states.reshape(batch_size, num_channels, -1).permute(0, 2, 1)
        hidden_states = self.layer_norm(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class GLPNLayer(nn.Module):
    def __init__(self, D, H, sr, bug=""):
        super().__init__()
        self.layer_norm_1, self.layer_norm_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attention, self.output = GLPNEfficientSelfAttention(D, H, sr, bug), nn.Linear(D, D)
        self.dense1, self.dense2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, hidden_states, height, width):
        hidden_states = self.output(self.attention(self.layer_norm_1(hidden_states), height, width)) + hidden_states
        return self.dense2(nn.functional.gelu(self.dense1(self.layer_norm_2(hidden_states)))) + hidden_states


class GLPNEncoderStage(nn.Module):
    def __init__(self, D, H, sr=2, bug=""):
        super().__init__()
        self.proj = nn.Conv2d(3, D, kernel_size=7, stride=4, padding=3)
        self.patch_norm, self.block, self.layer_norm = nn.LayerNorm(D), GLPNLayer(D, H, sr, bug), nn.LayerNorm(D)

    def forward(self, pixel_values):
        embeddings = self.proj(pixel_values)
        _, _, height, width = embeddings.shape
        embeddings = self.patch_norm(embeddings.flatten(2).transpose(1, 2))
        hidden_states = self.layer_norm(self.block(embeddings, height, width))
        batch_size = pixel_values.shape[0]
        return hidden_states.reshape(batch_size, height, width, -1).permute(0, 3, 1, 2).contiguous()


BUGS = ("sr-reshape-without-permute", "reduced-back-without-permute")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=4 Wp=6",)
EQUAL = {"B=2 D=32 H=4 Hp=4 Wp=6": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=4, Wp=6):
    torch.manual_seed(0)
    return GLPNEncoderStage(D, H, bug=bug).eval(), (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
