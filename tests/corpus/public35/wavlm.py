"""huggingface/transformers, src/transformers/models/wavlm/modeling_wavlm.py (v4.46, ``WavLMAttention`` with
``compute_bias``, ``_relative_positions_bucket``, ``torch_multi_head_self_attention``): WavLM's gated relative
position bias. A bidirectional bucketed bias ``rel_attn_embed(bucket(memory - context))`` ``(T, T, H)`` is
permuted to ``(H, T, T)``, ``unsqueeze(0).repeat(B, 1, 1, 1).view(B·H, T, T)``; a gate from each head's slice of
the hidden states (``view(B, T, H, -1).permute(0, 2, 1, 3)``, ``gru_rel_pos_linear`` to 8, ``view(..., 2, 4).sum(-1)``,
``sigmoid``, ``chunk(2)``, ``gate_a * (gate_b * const - 1) + 2``) scales it per query, ``view(B·H, T, 1)``; the
result is the float ``attn_mask`` of ``F.multi_head_attention_forward`` (separate q/k/v weights, the inputs
``transpose(0, 1)`` to ``(T, B, D)``, padding as ``key_padding_mask``).

Bugs: ``gate-view-heads-first``: the gate's input viewed straight to the head layout ``view(B, H, T, -1)``
without the ``permute`` (each "head" a run of tokens' features: tokens and heads mixed; a plain ``view(B, T, H,
-1)`` without the permute would not even broadcast against ``gru_rel_pos_const (1, H, 1, 1)``);
``bias-heads-outer``: the bias repeated ``unsqueeze(1).repeat(1, B, 1, 1).view(H·B, T, T)`` (heads outer, while
``multi_head_attention_forward`` lays its ``B·H`` batch out batch-major).

Twin: ``relative-reversed``: the relative position taken ``context - memory`` (``q - k``, not ``k - q``): with a
learned bucket table this only relabels the table's rows (bucket ``b`` <-> ``b ± num_buckets/2``), so a freshly
initialised model is the same model; only a checkpoint would tell (a value-level slip, no name decides it)."""

import math
import sys

import torch
from torch import nn


class WavLMAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_buckets=32, max_distance=64, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.num_buckets, self.max_distance, self.bug = num_buckets, max_distance, bug
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.gru_rel_pos_const = nn.Parameter(torch.ones(1, self.num_heads, 1, 1))
        self.gru_rel_pos_linear = nn.Linear(self.head_dim, 8)
        self.rel_attn_embed = nn.Embedding(self.num_buckets, self.num_heads)

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        position_bias = self.compute_bias(tgt_len, tgt_len)
        if self.bug == "bias-heads-outer":
            position_bias = position_bias.unsqueeze(1).repeat(1, bsz, 1, 1)
        else:
            position_bias = position_bias.unsqueeze(0).repeat(bsz, 1, 1, 1)
        position_bias = position_bias.view(bsz * self.num_heads, tgt_len, tgt_len)
        if self.bug == "gate-view-heads-first":
            gated_hidden_states = hidden_states.view(bsz, self.num_heads, tgt_len, -1)
        else:
            gated_hidden_states = hidden_states.view(hidden_states.shape[:-1] + (self.num_heads, -1))
            gated_hidden_states = gated_hidden_states.permute(0, 2, 1, 3)
        relative_position_proj = self.gru_rel_pos_linear(gated_hidden_states)
        relative_position_proj = relative_position_proj.view(gated_hidden_states.shape[:-1] + (2, 4)).sum(-1)
        gate_a, gate_b = torch.sigmoid(relative_position_proj).chunk(2, dim=-1)
        gate_output = gate_a * (gate_b * self.gru_rel_pos_const - 1.0) + 2.0
        gated_position_bias = gate_output.view(bsz * self.num_heads, -1, 1) * position_bias
        return self.torch_multi_head_self_attention(hidden_states, attention_mask, gated_position_bias)

    def torch_multi_head_self_attention(self, hidden_states, attention_mask, gated_position_bias):
        query = key = value = hidden_states.transpose(0, 1)
        key_padding_mask = attention_mask.ne(1)
        attn_output, _ = nn.functional.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, torch.empty([0]),
            torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias)), None, None, False, 0.0,
            self.out_proj.weight, self.out_proj.bias, self.training, key_padding_mask, False, gated_position_bias,
            use_separate_proj_weight=True, q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight)
        return attn_output.transpose(0, 1)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        if self.bug == "relative-reversed":
            relative_position = context_position - memory_position
        else:
            relative_position = memory_position - context_position
        relative_position_bucket = self._relative_positions_bucket(relative_position)
        values = self.rel_attn_embed(relative_position_bucket)
        return values.permute([2, 0, 1])

    def _relative_positions_bucket(self, relative_positions):
        num_buckets = self.num_buckets // 2
        relative_buckets = (relative_positions > 0).to(torch.long) * num_buckets
        relative_positions = torch.abs(relative_positions)
        max_exact = num_buckets // 2
        is_small = relative_positions < max_exact
        relative_positions_if_large = torch.log(relative_positions.float() / max_exact)
        relative_positions_if_large = relative_positions_if_large / math.log(self.max_distance / max_exact)
        relative_positions_if_large = relative_positions_if_large * (num_buckets - max_exact)
        relative_position_if_large = (max_exact + relative_positions_if_large).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
        return relative_buckets + torch.where(is_small, relative_positions, relative_position_if_large)


class WavLMEncoderLayer(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.attention = WavLMAttention(D, H, bug=bug)
        self.layer_norm, self.final_layer_norm = nn.LayerNorm(D), nn.LayerNorm(D)
        self.feed_forward = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, hidden_states, attention_mask):
        hidden_states = self.layer_norm(hidden_states + self.attention(hidden_states, attention_mask))
        return self.final_layer_norm(hidden_states + self.feed_forward(hidden_states))


class WavLMEncoder(nn.Module):
    def __init__(self, D, H, bug=""):
        super().__init__()
        self.layer_norm = nn.LayerNorm(D)
        self.layers = nn.ModuleList([WavLMEncoderLayer(D, H, bug) for _ in range(2)])

    def forward(self, hidden_states, attention_mask):
        hidden_states = self.layer_norm(hidden_states * attention_mask.unsqueeze(-1).to(hidden_states.dtype))
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


BUGS = ("gate-view-heads-first", "bias-heads-outer")
TWINS = ("relative-reversed",)
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    hidden_states = torch.randn(B, T, D)                                      # the feature projection's output
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -2:] = 0                                               # entry 1 right-padded
    return WavLMEncoder(D, H, bug).eval(), (hidden_states, attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
