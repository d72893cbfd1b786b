"""huggingface/transformers, src/transformers/models/convbert/modeling_convbert.py (v4.46, ``SeparableConv1D``,
``ConvBertSelfAttention``): ConvBERT's mixed attention: half the heads (``head_ratio=2``) are self-attention
heads, the other half a span-based dynamic convolution: a depthwise + pointwise ``Conv1d`` over the states
``transpose(1, 2)`` gives the key span, multiplied with the queries; a ``Linear`` to ``H·k`` gives each token's
kernel, ``reshape(-1, k, 1)`` and ``softmax(dim=1)``; the values for the conv (``conv_out_layer``) are
``unfold``ed over a ``(k, 1)`` window (``transpose(1, 2).unsqueeze(-1)``, padding ``(k-1)//2``), then
``transpose(1, 2).reshape(B, -1, all_head_size, k)``, ``reshape(-1, d, k)``, ``matmul`` with the kernels,
``reshape(-1, H, d)``; the attention heads' context ``permute(0, 2, 1, 3)`` and the conv heads ``cat``ed along
heads, ``view(B, T, 2·all_head_size)``. ``DIMS``' ``H`` is the heads of each kind (the config's
``num_attention_heads`` is ``2·H``), ``d_k`` their width: the names a reader gives the attention heads.

Bugs: ``unfold-reshape-without-transpose``: the unfolded ``(B, all_head·k, T)`` ``reshape(B, -1, all_head, k)``ed
without ``transpose(1, 2)`` (the windows' taps and tokens mixed: the natural slip after ``F.unfold``);
``context-view-without-permute``: the attention heads' context ``(B, H, T, d)`` ``view``ed ``(B, T, H, d)`` with
no ``permute(0, 2, 1, 3)`` (heads and tokens mixed before the ``cat`` with the conv heads)."""

import math
import sys

import torch
from torch import nn


class SeparableConv1D(nn.Module):
    def __init__(self, input_filters, output_filters, kernel_size):
        super().__init__()
        self.depthwise = nn.Conv1d(input_filters, input_filters, kernel_size, groups=input_filters,
                                   padding=kernel_size // 2, bias=False)
        self.pointwise = nn.Conv1d(input_filters, output_filters, kernel_size=1, bias=False)
        self.bias = nn.Parameter(torch.zeros(output_filters, 1))

    def forward(self, hidden_states):
        return self.pointwise(self.depthwise(hidden_states)) + self.bias


class ConvBertSelfAttention(nn.Module):
    def __init__(self, hidden_size, heads, head_ratio=2, conv_kernel_size=3, bug=""):
        super().__init__()
        new_num_attention_heads = heads // head_ratio
        self.num_attention_heads, self.head_ratio, self.bug = new_num_attention_heads, head_ratio, bug
        self.conv_kernel_size = conv_kernel_size
        self.attention_head_size = hidden_size // heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)
        self.key_conv_attn_layer = SeparableConv1D(hidden_size, self.all_head_size, conv_kernel_size)
        self.conv_kernel_layer = nn.Linear(self.all_head_size, self.num_attention_heads * conv_kernel_size)
        self.conv_out_layer = nn.Linear(hidden_size, self.all_head_size)
        self.unfold = nn.Unfold(kernel_size=[conv_kernel_size, 1], padding=[int((conv_kernel_size - 1) / 2), 0])

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        mixed_query_layer = self.query(hidden_states)
        batch_size = hidden_states.size(0)
        mixed_key_layer, mixed_value_layer = self.key(hidden_states), self.value(hidden_states)
        mixed_key_conv_attn_layer = self.key_conv_attn_layer(hidden_states.transpose(1, 2)).transpose(1, 2)
        query_layer = self.transpose_for_scores(mixed_query_layer)
        key_layer = self.transpose_for_scores(mixed_key_layer)
        value_layer = self.transpose_for_scores(mixed_value_layer)
        conv_attn_layer = torch.multiply(mixed_key_conv_attn_layer, mixed_query_layer)
        conv_kernel_layer = self.conv_kernel_layer(conv_attn_layer)
        conv_kernel_layer = torch.reshape(conv_kernel_layer, [-1, self.conv_kernel_size, 1])
        conv_kernel_layer = torch.softmax(conv_kernel_layer, dim=1)
        conv_out_layer = self.conv_out_layer(hidden_states)
        conv_out_layer = torch.reshape(conv_out_layer, [batch_size, -1, self.all_head_size])
        conv_out_layer = conv_out_layer.transpose(1, 2).contiguous().unsqueeze(-1)
        conv_out_layer = nn.functional.unfold(conv_out_layer, kernel_size=[self.conv_kernel_size, 1], dilation=1,
                                              padding=[(self.conv_kernel_size - 1) // 2, 0], stride=1)
        if self.bug == "unfold-reshape-without-transpose":
            conv_out_layer = conv_out_layer.reshape(batch_size, -1, self.all_head_size, self.conv_kernel_size)
        else:
            conv_out_layer = conv_out_layer.transpose(1, 2).reshape(
                batch_size, -1, self.all_head_size, self.conv_kernel_size)
        conv_out_layer = torch.reshape(conv_out_layer, [-1, self.attention_head_size, self.conv_kernel_size])
        conv_out_layer = torch.matmul(conv_out_layer, conv_kernel_layer)
        conv_out_layer = torch.reshape(conv_out_layer, [-1, self.all_head_size])

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        if self.bug == "context-view-without-permute":
            context_layer = context_layer.contiguous().view(batch_size, -1, self.num_attention_heads,
                                                            self.attention_head_size)
        else:
            context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        conv_out = torch.reshape(conv_out_layer, [batch_size, -1, self.num_attention_heads,
                                                  self.attention_head_size])
        context_layer = torch.cat([context_layer, conv_out], 2)
        new_context_layer_shape = context_layer.size()[:-2] + (self.head_ratio * self.all_head_size,)
        return context_layer.view(*new_context_layer_shape)


class ConvBertLayer(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.attention, self.dense = ConvBertSelfAttention(D, H, bug=bug), nn.Linear(D, D)
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.intermediate, self.output = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, hidden_states):
        hidden_states = self.norm1(self.dense(self.attention(hidden_states)) + hidden_states)
        return self.norm2(self.output(nn.functional.gelu(self.intermediate(hidden_states))) + hidden_states)


class ConvBertModel(nn.Module):
    def __init__(self, vocab, D, H, bug=""):
        super().__init__()
        self.word_embeddings, self.position_embeddings = nn.Embedding(vocab, D), nn.Embedding(32, D)
        self.layer = ConvBertLayer(D, H, bug)

    def forward(self, input_ids):
        position_ids = torch.arange(input_ids.shape[1]).unsqueeze(0)
        return self.layer(self.word_embeddings(input_ids) + self.position_embeddings(position_ids))


BUGS = ("unfold-reshape-without-transpose", "context-view-without-permute")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 d_k=8",)


def build(bug="", B=2, T=6, D=64, H=4, d_k=8):
    torch.manual_seed(0)
    return ConvBertModel(50, D, 2 * H, bug=bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
