"""huggingface/transformers, ``src/transformers/models/longt5/modeling_longt5.py`` (v4.40,
``LongT5TransientGlobalAttention``, ``_split_into_blocks``, ``_concatenate_3_blocks``,
``_make_global_fixed_block_ids``, ``_create_global_aggregates``, ``_make_side_relative_position_ids``): local
attention in blocks of ``block_len`` (each block's queries see the previous, its own and the next block of keys,
``_concatenate_3_blocks`` by padding and slicing), plus transient global tokens: the sum of each
``global_block_size`` tokens (``einsum("...nd,...ng->...gd", hidden, one_hot(block_ids))``), layer-normed and
projected by the same ``k``/``v``, appended to every block's keys; scores ``einsum("...qhd,...khd->...hqk")``
(T5: no scaling) plus the local mask bias (``|i - j| < block_len``) and the side bias (a learnt bucket per
head of ``global_positions - block_ids``, T5's bidirectional buckets), ``softmax(float)``,
``einsum("...hqk,...khd->...qhd")``, the blocks merged back to ``(B, T, D)``, ``o``.

Bugs: ``side-bias-view-for-permute``: the side bias's ``(nb, l, G, H)`` brought to heads-first with
``view(nb, H, l, G)`` instead of ``permute(0, 3, 1, 2)`` (the view-for-permute slip: each head's bias row
reads other heads' entries);
``merge-heads-before-queries``: the weighted values einsum'd to ``...hqd`` and reshaped straight to
``(B, T, D)`` (heads and tokens interleave: the ``...qhd`` layout the reshape expects not produced)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def _split_into_blocks(x, block_len, dim):
    num_blocks = x.shape[dim] // block_len
    output_shape = x.shape[:dim] + (num_blocks, block_len) + x.shape[(dim + 1):]
    return x.reshape(output_shape)


def _concatenate_3_blocks(x, block_dim, sequence_dim):
    num_blocks = x.shape[block_dim]
    pad = [(0, 0)] * x.ndim
    pad[block_dim] = (1, 1)
    pad = sum(pad[::-1], ())
    x = F.pad(x, pad=pad, mode="constant", value=0)
    blocks_list = []
    for i in range(3):
        indices = [slice(0, None)] * x.ndim
        indices[block_dim] = slice(i, i + num_blocks)
        blocks_list.append(x[tuple(indices)])
    return torch.cat(blocks_list, dim=sequence_dim)


def _relative_position_bucket(relative_position, num_buckets=8, max_distance=16):
    num_buckets //= 2
    relative_buckets = (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact + 1e-6)
                         / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, large)


class LongT5TransientGlobalAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_len, global_block_size, bug=""):
        super().__init__()
        self.n_heads, self.key_value_proj_dim = n_heads, d_model // n_heads
        self.block_len, self.global_block_size, self.bug = block_len, global_block_size, bug
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.global_relative_attention_bias = nn.Embedding(8, n_heads)
        self.global_input_layer_norm = nn.LayerNorm(d_model)

    def forward(self, hidden_states):
        batch_size, seq_length = hidden_states.shape[:2]
        block_ids = torch.arange(seq_length) // self.global_block_size                  # (T,)
        num_globals = seq_length // self.global_block_size
        one_hot = F.one_hot(block_ids, num_globals).type(hidden_states.dtype)           # (T, G)
        global_inputs = torch.einsum("...nd,...ng->...gd", hidden_states, one_hot)      # (B, G, D)
        global_inputs = self.global_input_layer_norm(global_inputs)

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim)

        query_states = shape(self.q(hidden_states))                                     # (B, T, H, d)
        key_states, value_states = shape(self.k(hidden_states)), shape(self.v(hidden_states))
        side_key_states, side_value_states = shape(self.k(global_inputs)), shape(self.v(global_inputs))

        query_states = _split_into_blocks(query_states, self.block_len, dim=1)           # (B, nb, l, H, d)
        key_states = _split_into_blocks(key_states, self.block_len, dim=1)
        value_states = _split_into_blocks(value_states, self.block_len, dim=1)
        key_states = _concatenate_3_blocks(key_states, block_dim=1, sequence_dim=2)      # (B, nb, 3l, H, d)
        value_states = _concatenate_3_blocks(value_states, block_dim=1, sequence_dim=2)
        reps = [1] * (side_key_states.ndim + 1)
        reps[1] = key_states.shape[1]
        side_key_states = side_key_states.unsqueeze(1).repeat(reps)                     # (B, nb, G, H, d)
        side_value_states = side_value_states.unsqueeze(1).repeat(reps)
        key_states = torch.cat([key_states, side_key_states], dim=2)                    # (B, nb, 3l+G, H, d)
        value_states = torch.cat([value_states, side_value_states], dim=2)

        scores = torch.einsum("...qhd,...khd->...hqk", query_states, key_states)         # (B, nb, H, l, 3l+G)

        position = torch.arange(3 * self.block_len)
        relative = position[None, :] - (position[self.block_len:2 * self.block_len])[:, None]   # (l, 3l)
        local_mask = torch.abs(relative) < self.block_len
        local_bias = torch.where(local_mask, 0.0, -1e10)                                 # (l, 3l)

        global_positions = torch.arange(num_globals)                                     # (G,)
        blocked_ids = _split_into_blocks(block_ids, self.block_len, dim=0)               # (nb, l)
        side_relative_position = global_positions - blocked_ids[..., None]              # (nb, l, G)
        side_bucket = _relative_position_bucket(side_relative_position)
        side_bias = self.global_relative_attention_bias(side_bucket)                     # (nb, l, G, H)
        if self.bug == "side-bias-view-for-permute":
            side_bias = side_bias.view(side_bias.shape[0], self.n_heads, self.block_len, -1)
        else:
            side_bias = side_bias.permute(0, 3, 1, 2)                                    # (nb, H, l, G)
        position_bias = torch.cat([local_bias.expand(side_bias.shape[:-1] + (3 * self.block_len,)),
                                   side_bias], dim=-1)                                   # (nb, H, l, 3l+G)
        scores = scores + position_bias
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        if self.bug == "merge-heads-before-queries":
            attn_output = torch.einsum("...hqk,...khd->...hqd", attn_weights, value_states)
        else:
            attn_output = torch.einsum("...hqk,...khd->...qhd", attn_weights, value_states)  # (B, nb, l, H, d)
        attn_output = attn_output.reshape(batch_size, seq_length, -1)
        return self.o(attn_output)


BUGS = ("side-bias-view-for-permute", "merge-heads-before-queries")
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return LongT5TransientGlobalAttention(D, H, 2, 4, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
