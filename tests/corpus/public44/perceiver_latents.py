"""huggingface/transformers, models/perceiver/modeling_perceiver.py (``PerceiverEmbeddings``,
``PerceiverSelfAttention``, ``PerceiverLayer``, ``PerceiverEncoder``), main: the learned latents ``nn.Parameter(
torch.randn(num_latents, d_latents))`` given to every example by ``self.latents.expand(batch_size, -1, -1)``; a
cross-attention whose queries are the latents and whose keys and values are the inputs (``layernorm1`` on the
latents, ``layernorm2`` on the inputs), heads split by ``transpose_for_scores`` (``view(batch_size, seq_length,
heads, head_size).permute(0, 2, 1, 3)``), ``matmul(q, k.transpose(-1, -2)) / sqrt(head_size)``, softmax over the
inputs, ``matmul(probs, v).permute(0, 2, 1, 3).contiguous()`` and ``view(..., -1)``, a dense output, a residual
with the latents, then a self-attention over the latents (the "latent transformer"). Sizes: the inputs ``[B, T,
D]``, the latents ``[S, D]`` (``S`` latents: a second sequence, here of queries); ``num_cross_attention_heads``
set to ``num_self_attention_heads`` (the config's default is 1 cross head).

Bug (a natural slip): ``cross-scores-heads-unsplit-keys``: the keys of the cross-attention split with
``view(batch_size, heads, seq_length, head_size)`` (no permute: each "head" reads a block of other tokens' features)."""

import math
import sys

import torch
from torch import nn


class PerceiverSelfAttention(nn.Module):
    def __init__(self, q_dim, kv_dim, num_heads, is_cross_attention=False, bug=""):
        super().__init__()
        self.bug = bug
        self.is_cross_attention = is_cross_attention
        self.num_heads = num_heads
        self.head_size = q_dim // num_heads
        self.layernorm1 = nn.LayerNorm(q_dim)
        self.layernorm2 = nn.LayerNorm(kv_dim) if is_cross_attention else nn.Identity()
        self.query = nn.Linear(q_dim, q_dim)
        self.key = nn.Linear(kv_dim, q_dim)
        self.value = nn.Linear(kv_dim, q_dim)
        self.dense = nn.Linear(q_dim, q_dim)

    def transpose_for_scores(self, x, keys=False):
        batch_size, seq_length, _ = x.shape
        if keys and self.bug == "cross-scores-heads-unsplit-keys" and self.is_cross_attention:
            return x.view(batch_size, self.num_heads, seq_length, self.head_size)       # (B, H, T, d_k)
        x = x.view(batch_size, seq_length, self.num_heads, self.head_size)               # (B, T, H, d_k)
        return x.permute(0, 2, 1, 3)                                                     # (B, H, T, d_k)

    def forward(self, hidden_states, inputs=None):
        hidden_states = self.layernorm1(hidden_states)
        inputs = self.layernorm2(inputs) if self.is_cross_attention else hidden_states
        queries = self.transpose_for_scores(self.query(hidden_states))                  # (B, H, S, d_k)
        keys = self.transpose_for_scores(self.key(inputs), keys=True)                    # (B, H, T, d_k)
        values = self.transpose_for_scores(self.value(inputs))                           # (B, H, T, d_k)
        attention_scores = torch.matmul(queries, keys.transpose(-1, -2))                 # (B, H, S, T)
        attention_scores = attention_scores / math.sqrt(self.head_size)
        attention_probs = nn.Softmax(dim=-1)(attention_scores)
        context_layer = torch.matmul(attention_probs, values)                            # (B, H, S, d_k)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()                   # (B, S, H, d_k)
        batch_size, seq_len = context_layer.shape[:2]
        context_layer = context_layer.view(batch_size, seq_len, -1)                      # (B, S, D)
        return self.dense(context_layer)


class PerceiverLayer(nn.Module):
    def __init__(self, q_dim, kv_dim, num_heads, is_cross_attention=False, bug=""):
        super().__init__()
        self.attention = PerceiverSelfAttention(q_dim, kv_dim, num_heads, is_cross_attention, bug=bug)
        self.layernorm = nn.LayerNorm(q_dim)
        self.mlp = nn.Sequential(nn.Linear(q_dim, q_dim), nn.GELU(), nn.Linear(q_dim, q_dim))

    def forward(self, hidden_states, inputs=None):
        hidden_states = self.attention(hidden_states, inputs) + hidden_states           # (B, S, D)
        return self.mlp(self.layernorm(hidden_states)) + hidden_states


class Perceiver(nn.Module):
    def __init__(self, num_latents, d_model, num_heads, bug=""):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_latents, d_model))
        self.cross_attention = PerceiverLayer(d_model, d_model, num_heads, is_cross_attention=True, bug=bug)
        self.self_attention = PerceiverLayer(d_model, d_model, num_heads)

    def forward(self, inputs):
        batch_size = inputs.shape[0]
        latents = self.latents.expand(batch_size, -1, -1)                                # (B, S, D)
        hidden_states = self.cross_attention(latents, inputs)                            # (B, S, D)
        return self.self_attention(hidden_states)                                        # (B, S, D)


BUGS = ("cross-scores-heads-unsplit-keys",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 S=3",)
EQUAL = {"B=2 T=6 D=32 H=4 S=3": "B=4 T=4 D=32 H=4 S=4"}


def build(bug="", B=2, T=6, D=32, H=4, S=3):
    torch.manual_seed(0)
    model = Perceiver(S, D, H, bug=bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
