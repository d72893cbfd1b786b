"""huggingface/transformers PR #22416 ("[Roformer] Fixing a bug in RoFormerEncoder where it was ignoring the
length of past_key_values when generating as a decoder", merged; M2M100/XGLM's PR #15751 is the same slip in
learned positions): ``RoFormerEncoder`` built its sinusoidal rotary table from ``hidden_states.shape[:-1]``
alone, positions ``arange(T)``, so at each cached step the new tokens were rotated as if they stood at 0..T-1
while the cached keys kept their true positions. The fix passes ``past_key_values_length``:
``arange(P, P + T)``.

RoFormer's idiom: ``RoFormerSinusoidalPositionalEmbedding`` (an ``nn.Embedding`` whose weight is the
sinusoid table, read at the positions), ``chunk(2, dim=-1)`` into sin and cos, ``stack([sin, sin],
dim=-1).reshape_as(...)`` (interleaved pairs), the rotation ``stack([-x[..., 1::2], x[..., ::2]],
dim=-1).reshape_as(x)``, applied to the new queries and keys before the cache concat on the token axis.
The model runs a prefill of T tokens, then one decoding step against the cache (its position T, rotated as 0
with the bug).

Bug (argument): ``positions-from-zero``."""

import math
import sys

import torch
from torch import nn

BUGS = ("positions-from-zero",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RoFormerSinusoidalPositionalEmbedding(nn.Embedding):
    def __init__(self, num_positions, embedding_dim):
        super().__init__(num_positions, embedding_dim)
        position_enc = torch.tensor([[pos / 10000 ** (2 * (j // 2) / embedding_dim) for j in range(embedding_dim)]
                                     for pos in range(num_positions)])
        weight = torch.empty(num_positions, embedding_dim)
        sentinel = embedding_dim // 2
        weight[:, :sentinel] = torch.sin(position_enc[:, 0::2])
        weight[:, sentinel:] = torch.cos(position_enc[:, 1::2])
        self.weight = nn.Parameter(weight, requires_grad=False)

    def forward(self, input_ids_shape, past_key_values_length=0):
        bsz, seq_len = input_ids_shape[:2]
        positions = torch.arange(past_key_values_length, past_key_values_length + seq_len, dtype=torch.long)
        return super().forward(positions)                                       # (T, d)


def apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer):
    sin, cos = sinusoidal_pos.chunk(2, dim=-1)                                  # (1, 1, T, d/2)
    sin_pos = torch.stack([sin, sin], dim=-1).reshape_as(sinusoidal_pos)        # (1, 1, T, d)
    cos_pos = torch.stack([cos, cos], dim=-1).reshape_as(sinusoidal_pos)
    rotate_half_query = torch.stack([-query_layer[..., 1::2], query_layer[..., ::2]], dim=-1).reshape_as(query_layer)
    query_layer = query_layer * cos_pos + rotate_half_query * sin_pos
    rotate_half_key = torch.stack([-key_layer[..., 1::2], key_layer[..., ::2]], dim=-1).reshape_as(key_layer)
    key_layer = key_layer * cos_pos + rotate_half_key * sin_pos
    return query_layer, key_layer


class RoFormerSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = num_heads, hidden_size // num_heads
        self.query, self.key, self.value = (nn.Linear(hidden_size, hidden_size) for _ in range(3))

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)                         # (B, H, T, d)

    def forward(self, hidden_states, sinusoidal_pos, past_key_value=None):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer, key_layer = apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer)
        if past_key_value is not None:
            key_layer = torch.cat([past_key_value[0], key_layer], dim=2)        # (B, H, P+T, d)
            value_layer = torch.cat([past_key_value[1], value_layer], dim=2)
        past_key_value = (key_layer, value_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)       # (B, H, T, P+T)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.num_attention_heads * self.attention_head_size,)
        return context_layer.view(*new_context_layer_shape), past_key_value


class RoFormerEncoder(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.embed_positions = RoFormerSinusoidalPositionalEmbedding(64, hidden_size // num_heads)
        self.attention = RoFormerSelfAttention(hidden_size, num_heads)
        self.bug = bug

    def step(self, hidden_states, past_key_value=None):
        past = 0 if past_key_value is None or self.bug == "positions-from-zero" else past_key_value[0].shape[2]
        sinusoidal_pos = self.embed_positions(hidden_states.shape[:-1], past)[None, None, :, :]  # (1, 1, T, d)
        return self.attention(hidden_states, sinusoidal_pos, past_key_value)

    def forward(self, prompt, step):
        _, cache = self.step(prompt)                                             # prefill: T tokens
        out, _ = self.step(step, cache)                                          # one more token
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return RoFormerEncoder(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
