"""Beckschen/TransUNet, networks/vit_seg_modeling.py (``Embeddings`` and ``Attention``, master): the hybrid
encoder's patch embedding ``Conv2d(in_channels, hidden_size, kernel_size=patch, stride=patch)`` read as tokens by
``x.flatten(2)`` and ``x.transpose(-1, -2)`` with learned position embeddings, then the BERT-style ``Attention``:
``query``/``key``/``value`` ``Linear``\\ s, ``transpose_for_scores`` (``new_x_shape = x.size()[:-1] +
(num_attention_heads, attention_head_size)``, ``view``, ``permute(0, 2, 1, 3)``), ``matmul(q, k.transpose(-1,
-2)) / math.sqrt(attention_head_size)``, ``Softmax(dim=-1)``, dropout, the context ``permute(0, 2, 1, 3)
.contiguous()`` and ``view(*new_context_layer_shape)``, ``out``; pre-norm ``Block`` with residuals.

Bugs: ``scale-by-all-head-size``: the scores divided by ``math.sqrt(all_head_size)`` (the model width, not one
head's: the slip of porting a single-head formula); ``context-view-unpermuted``: the context merged by
``context_layer.contiguous().view(*new_context_layer_shape)`` without the ``permute(0, 2, 1, 3)`` back (heads
and tokens mixed: the slip of readers rewriting the BERT helper)."""

import math
import sys

import torch
from torch import nn


class Embeddings(nn.Module):
    def __init__(self, hidden_size, patch, grid):
        super().__init__()
        self.patch_embeddings = nn.Conv2d(3, hidden_size, kernel_size=patch, stride=patch)
        self.position_embeddings = nn.Parameter(torch.randn(1, grid * grid, hidden_size) * 0.02)

    def forward(self, x):
        x = self.patch_embeddings(x)          # [B, D, Hp, Wp]
        x = x.flatten(2)                      # [B, D, N]
        x = x.transpose(-1, -2)               # [B, N, D]
        return x + self.position_embeddings


class Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_attention_heads = num_heads
        self.attention_head_size = hidden_size // num_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)
        self.out = nn.Linear(hidden_size, hidden_size)
        self.attn_dropout = nn.Dropout(0.0)
        self.proj_dropout = nn.Dropout(0.0)
        self.softmax = nn.Softmax(dim=-1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(*new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        width = self.all_head_size if self.bug == "scale-by-all-head-size" else self.attention_head_size
        attention_scores = attention_scores / math.sqrt(width)
        attention_probs = self.attn_dropout(self.softmax(attention_scores))
        context_layer = torch.matmul(attention_probs, value_layer)
        if self.bug != "context-view-unpermuted":
            context_layer = context_layer.permute(0, 2, 1, 3)
        context_layer = context_layer.contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        if self.bug == "context-view-unpermuted":
            new_context_layer_shape = hidden_states.size()[:-1] + (self.all_head_size,)
        context_layer = context_layer.view(*new_context_layer_shape)
        return self.proj_dropout(self.out(context_layer))


class Block(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.attention_norm = nn.LayerNorm(hidden_size, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads, bug)

    def forward(self, x):
        return x + self.attn(self.attention_norm(x))


class Encoder(nn.Module):
    def __init__(self, hidden_size, num_heads, patch, grid, bug=""):
        super().__init__()
        self.embeddings = Embeddings(hidden_size, patch, grid)
        self.layer = Block(hidden_size, num_heads, bug)

    def forward(self, images):
        return self.layer(self.embeddings(images))


BUGS = ("scale-by-all-head-size", "context-view-unpermuted")
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=3",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=3": "B=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=3):
    torch.manual_seed(0)
    model = Encoder(D, H, patch=4, grid=Hp, bug=bug).eval()
    return model, (torch.randn(B, 3, 4 * Hp, 4 * Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
