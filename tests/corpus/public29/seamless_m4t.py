"""huggingface/transformers, src/transformers/models/seamless_m4t_v2/modeling_seamless_m4t_v2.py (v4.46,
``SeamlessM4Tv2ConformerSelfAttention``, ``SeamlessM4Tv2ConformerEncoder._apply_chunk_attention``,
``SeamlessM4Tv2ConformerEncoderLayer``): the speech encoder's conformer attention with ``relative_key`` positions.
``linear_q/k/v``, each ``view(B, -1, H, d).transpose(1, 2)``, ``q @ k.transpose(-2, -1) / sqrt(d)``; the Shaw-style
term: ``distance = position_ids_r - position_ids_l`` (key index minus query index), clamped to ``[-left_max,
right_max]`` (64 and 8: the streaming encoder looks further back than ahead), ``distance_embedding(distance +
left_max)`` ``(T, T, d)``, ``einsum("bhld,lrd->bhlr", q, pos) / sqrt(d)`` added to the scores; the chunk mask
(``chunk_indices = arange(T) // chunk_size``, each query sees its own chunk and ``left_chunk_num`` chunks before it:
``(indices < start) | (indices >= end)``, filled with ``finfo.min``); ``softmax(dim=-1)``, ``@ v``,
``transpose(1, 2).reshape(B, -1, H * d)``, ``linear_out``; in a macaron block (half-step FFN, attention, the
convolution module: pointwise GLU, a depthwise ``Conv1d`` over time on ``transpose(1, 2)``, half-step FFN).

Bugs: ``distance-reversed``: ``distance = position_ids_l - position_ids_r`` (query minus key: the relative term's
direction reversed, each query's bias for a key ``k`` steps back given to the key ``k`` steps ahead; the (q - k) for
(k - q) slip); ``chunk-end-off-by-one``: ``end = (chunk_indices + 1) * chunk_size + 1`` (each chunk's last query
also sees the first frame of the next chunk: a streaming encoder that reads ahead)."""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


class SeamlessM4Tv2ConformerSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug="", left_max=64, right_max=8):
        super().__init__()
        self.head_size, self.num_heads, self.bug = hidden_size // num_heads, num_heads, bug
        self.linear_q, self.linear_k = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.linear_v, self.linear_out = nn.Linear(hidden_size, hidden_size), nn.Linear(hidden_size, hidden_size)
        self.left_max_position_embeddings, self.right_max_position_embeddings = left_max, right_max
        self.distance_embedding = nn.Embedding(left_max + right_max + 1, self.head_size)

    def forward(self, hidden_states, attention_mask):
        batch_size, sequence_length, hidden_size = hidden_states.size()
        query = self.linear_q(hidden_states).view(batch_size, -1, self.num_heads, self.head_size).transpose(1, 2)
        key = self.linear_k(hidden_states).view(batch_size, -1, self.num_heads, self.head_size).transpose(1, 2)
        value = self.linear_v(hidden_states).view(batch_size, -1, self.num_heads, self.head_size).transpose(1, 2)
        attn_weights = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.head_size)

        query_length, key_length = query.shape[2], key.shape[2]
        position_ids_l = torch.arange(query_length, dtype=torch.long).view(-1, 1)
        position_ids_r = torch.arange(key_length, dtype=torch.long).view(1, -1)
        if self.bug == "distance-reversed":
            distance = position_ids_l - position_ids_r
        else:
            distance = position_ids_r - position_ids_l
        distance = torch.clamp(distance, -self.left_max_position_embeddings, self.right_max_position_embeddings)
        positional_embedding = self.distance_embedding(distance + self.left_max_position_embeddings)
        relative_position_attn_weights = torch.einsum("bhld,lrd->bhlr", query, positional_embedding)
        attn_weights = attn_weights + (relative_position_attn_weights / math.sqrt(self.head_size))

        attn_weights = attn_weights + attention_mask
        attn_weights = torch.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)
        attn_output = attn_output.transpose(1, 2).reshape(batch_size, -1, self.num_heads * self.head_size)
        return self.linear_out(attn_output)


class SeamlessM4Tv2ConformerConvolutionModule(nn.Module):
    def __init__(self, dim, kernel_size=3):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)
        self.pointwise_conv1 = nn.Conv1d(dim, 2 * dim, kernel_size=1, bias=False)
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim, bias=False)
        self.depthwise_layer_norm = nn.LayerNorm(dim)
        self.pointwise_conv2 = nn.Conv1d(dim, dim, kernel_size=1, bias=False)

    def forward(self, hidden_states):
        hidden_states = self.layer_norm(hidden_states).transpose(1, 2)                    # (B, D, T)
        hidden_states = F.glu(self.pointwise_conv1(hidden_states), dim=1)
        hidden_states = self.depthwise_conv(hidden_states)
        hidden_states = self.depthwise_layer_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        hidden_states = self.pointwise_conv2(F.silu(hidden_states))
        return hidden_states.transpose(1, 2)                                               # (B, T, D)


class SeamlessM4Tv2ConformerEncoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.ffn1_layer_norm, self.ffn2_layer_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn1 = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))
        self.ffn2 = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.self_attn = SeamlessM4Tv2ConformerSelfAttention(dim, heads, bug)
        self.conv_module = SeamlessM4Tv2ConformerConvolutionModule(dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, hidden_states, attention_mask):
        hidden_states = hidden_states + 0.5 * self.ffn1(self.ffn1_layer_norm(hidden_states))
        hidden_states = hidden_states + self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask)
        hidden_states = hidden_states + self.conv_module(hidden_states)
        hidden_states = hidden_states + 0.5 * self.ffn2(self.ffn2_layer_norm(hidden_states))
        return self.final_layer_norm(hidden_states)


class SeamlessM4Tv2ConformerEncoder(nn.Module):
    def __init__(self, dim, heads, bug="", chunk_size=2, left_chunk_num=1):
        super().__init__()
        self.chunk_size, self.left_chunk_num, self.bug = chunk_size, left_chunk_num, bug
        self.layers = nn.ModuleList([SeamlessM4Tv2ConformerEncoderLayer(dim, heads, bug)])
        self.layer_norm = nn.LayerNorm(dim)

    def _apply_chunk_attention(self, hidden_states):
        sequence_len = hidden_states.shape[1]
        chunk_indices = torch.div(torch.arange(sequence_len), self.chunk_size).long()
        start_indices = (chunk_indices - self.left_chunk_num).clamp_(min=0) * self.chunk_size
        start_indices = start_indices.unsqueeze(1).expand(-1, sequence_len)
        end_indices = (chunk_indices + 1) * self.chunk_size + (1 if self.bug == "chunk-end-off-by-one" else 0)
        end_indices = end_indices.clamp_(max=sequence_len).unsqueeze(1).expand(-1, sequence_len)
        indices = torch.arange(sequence_len).unsqueeze(0).expand(sequence_len, -1)
        chunk_mask = (indices < start_indices) | (indices >= end_indices)
        return chunk_mask.unsqueeze(0).unsqueeze(0).to(dtype=hidden_states.dtype)

    def forward(self, hidden_states):                                                      # (B, T, D)
        attention_mask = self._apply_chunk_attention(hidden_states)
        attention_mask = attention_mask.masked_fill(attention_mask.bool(), torch.finfo(hidden_states.dtype).min)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return self.layer_norm(hidden_states)


BUGS = ("distance-reversed", "chunk-end-off-by-one")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return SeamlessM4Tv2ConformerEncoder(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
