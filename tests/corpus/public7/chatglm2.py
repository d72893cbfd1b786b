"""THUDM/ChatGLM2-6B, modeling_chatglm.py (``SelfAttention``, ``CoreAttention``, ``RotaryEmbedding``,
``apply_rotary_pos_emb``; https://huggingface.co/THUDM/chatglm2-6b): sequence-first ``[sq, b, h]``; one
``query_key_value`` projection of width ``(np + 2 * g) * hn`` cut by ``split([np * hn, g * hn, g * hn],
dim=-1)`` and viewed ``(sq, b, np, hn)`` / ``(sq, b, g, hn)`` (multi-query groups); rotary on the first
half of each head: ``rot_dim = rope_cache.shape[-2] * 2``, ``x, x_pass = x[..., :rot_dim], x[...,
rot_dim:]``, ``xshaped = x.reshape(sq, -1, np, rot_dim // 2, 2)``, ``rope_cache.view(sq, -1, 1,
xshaped.size(3), 2)`` and the pairs rotated then ``flatten(3)``; the cache ``torch.stack([cos, sin],
dim=-1)`` of ``torch.outer(seq_idx, theta)``, picked ``rotary_pos_emb[position_ids]`` and
``.transpose(0, 1).contiguous()`` to ``[sq, b, ...]``; the groups widened by ``unsqueeze(-2)``, ``expand(-1,
-1, -1, np // g, -1)``, ``contiguous().view(sq, b, np, hn)``; ``CoreAttention`` (torch 2 path):
``permute(1, 2, 0, 3)`` of q, k, v, ``F.scaled_dot_product_attention(..., is_causal=True)``,
``permute(2, 0, 1, 3)`` and ``reshape(sq, b, hidden)``.

Bugs (argument): ``merge-no-permute``: the context reshaped ``(sq, b, hidden)`` straight from ``(b, np, sq,
hn)``, without ``permute(2, 0, 1, 3)``; ``rope-batch-first``: the cache picked by ``position_ids`` ``(b,
sq)`` used without ``.transpose(0, 1)``: viewed ``(sq, -1, 1, ...)``, its rows mix positions and batch
entries; ``groups-tiled``: the groups widened by ``repeat(1, 1, np // g, 1)`` (tiled: head h reads group h
% g, not h // (np / g)), the gqa head-order mistake. Twin (correct): ``rope-no-positions``: no
``position_ids`` (``rotary_pos_emb[None, :seq_length]``, batch axis of one): the missing transpose moves
only an axis of one entry, so the rows are in the same order."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("merge-no-permute", "rope-batch-first", "groups-tiled")
TWINS = ("rope-no-positions",)
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.dim = dim

    def forward(self, seq_len, n_elem, base=10000):
        theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=torch.float) / n_elem))
        seq_idx = torch.arange(seq_len, dtype=torch.float)
        idx_theta = torch.outer(seq_idx, theta).float()  # (T, n_elem/2)
        return torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)  # (T, n_elem/2, 2)


def apply_rotary_pos_emb(x, rope_cache):
    sq, b, np, hn = x.size(0), x.size(1), x.size(2), x.size(3)  # noqa: F841  (as in ChatGLM2)
    rot_dim = rope_cache.shape[-2] * 2
    x, x_pass = x[..., :rot_dim], x[..., rot_dim:]
    rope_cache = rope_cache[:sq]
    xshaped = x.reshape(sq, -1, np, rot_dim // 2, 2)  # (T, B, h, rot/2, 2)
    rope_cache = rope_cache.view(sq, -1, 1, xshaped.size(3), 2)  # (T, B, 1, rot/2, 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],
            xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1],
        ],
        -1,
    )
    x_out2 = x_out2.flatten(3)  # (T, B, h, rot)
    return torch.cat((x_out2, x_pass), dim=-1)  # (T, B, h, hn)


class SelfAttention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, groups=2, bug=""):
        super().__init__()
        self.bug = bug
        self.hidden_size_per_attention_head = hidden_size // num_heads
        self.num_attention_heads_per_partition = num_heads
        self.num_multi_query_groups_per_partition = groups
        self.hidden_size_per_partition = hidden_size
        self.qkv_hidden_size = hidden_size + 2 * self.hidden_size_per_attention_head * groups
        self.query_key_value = nn.Linear(hidden_size, self.qkv_hidden_size, bias=True)
        self.dense = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, rotary_pos_emb):
        np, g = self.num_attention_heads_per_partition, self.num_multi_query_groups_per_partition
        hn = self.hidden_size_per_attention_head
        mixed_x_layer = self.query_key_value(hidden_states)  # (T, B, (np + 2g)·hn)
        (query_layer, key_layer, value_layer) = mixed_x_layer.split([np * hn, g * hn, g * hn], dim=-1)
        query_layer = query_layer.view(query_layer.size()[:-1] + (np, hn))  # (T, B, np, hn)
        key_layer = key_layer.view(key_layer.size()[:-1] + (g, hn))  # (T, B, g, hn)
        value_layer = value_layer.view(value_layer.size()[:-1] + (g, hn))  # (T, B, g, hn)
        query_layer = apply_rotary_pos_emb(query_layer, rotary_pos_emb)
        key_layer = apply_rotary_pos_emb(key_layer, rotary_pos_emb)
        if self.bug == "groups-tiled":
            key_layer = key_layer.repeat(1, 1, np // g, 1)  # bug: head h reads group h % g
            value_layer = value_layer.repeat(1, 1, np // g, 1)
        else:
            key_layer = key_layer.unsqueeze(-2)
            key_layer = key_layer.expand(-1, -1, -1, np // g, -1)
            key_layer = key_layer.contiguous().view(key_layer.size()[:2] + (np, hn))  # (T, B, np, hn)
            value_layer = value_layer.unsqueeze(-2)
            value_layer = value_layer.expand(-1, -1, -1, np // g, -1)
            value_layer = value_layer.contiguous().view(value_layer.size()[:2] + (np, hn))  # (T, B, np, hn)
        # CoreAttention, the torch 2 path
        query_layer, key_layer, value_layer = [k.permute(1, 2, 0, 3) for k in [query_layer, key_layer, value_layer]]
        context_layer = F.scaled_dot_product_attention(query_layer, key_layer, value_layer, is_causal=True)
        if self.bug != "merge-no-permute":
            context_layer = context_layer.permute(2, 0, 1, 3)  # (T, B, np, hn)
        new_context_layer_shape = context_layer.size()[:-2] + (self.hidden_size_per_partition,)
        if self.bug == "merge-no-permute":
            new_context_layer_shape = (hidden_states.size(0), hidden_states.size(1), self.hidden_size_per_partition)
        context_layer = context_layer.reshape(*new_context_layer_shape)  # (T, B, D)
        return self.dense(context_layer)


class ChatGLMLayer(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, groups=2, bug=""):
        super().__init__()
        self.bug = bug
        self.rotary_pos_emb = RotaryEmbedding(hidden_size // num_heads // 2)
        self.self_attention = SelfAttention(hidden_size, num_heads, groups, bug)
        self.kv_channels = hidden_size // num_heads

    def forward(self, input_ids_embeds):
        seq_length, batch_size = input_ids_embeds.size(0), input_ids_embeds.size(1)
        rotary_pos_emb = self.rotary_pos_emb(16, self.kv_channels // 2)  # (max_len, hn/4, 2)
        if self.bug == "rope-no-positions":
            rotary_pos_emb = rotary_pos_emb[None, :seq_length]  # (1, T, hn/4, 2)
        else:
            position_ids = torch.arange(seq_length, dtype=torch.long).unsqueeze(0).repeat(batch_size, 1)
            rotary_pos_emb = rotary_pos_emb[position_ids]  # (B, T, hn/4, 2)
        if self.bug not in ("rope-batch-first", "rope-no-positions"):
            rotary_pos_emb = rotary_pos_emb.transpose(0, 1).contiguous()  # (T, B, hn/4, 2)
        return self.self_attention(input_ids_embeds, rotary_pos_emb)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4 H_kv=2': sequence-first hidden states (T, B, D), two multi-query groups."""
    torch.manual_seed(0)
    return ChatGLMLayer(D, H, 2, bug).eval(), (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
