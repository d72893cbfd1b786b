"""huggingface/transformers issue #48745 ("``RoFormerForCausalLM``, ``BigBirdForCausalLM``, ``RemBertForCausalLM``,
``MegatronBertForCausalLM`` attend to future tokens since v5.9.0 -- CLM training loss collapses", labelled bug;
fixed by pull request #48760): configured as decoders (``is_decoder=True``) these models "unconditionally
constructed bidirectional attention masks via ``create_bidirectional_mask(...)``", padding only, so every
position saw the tokens after it (its own label); the fix builds ``create_causal_mask`` when ``is_decoder``.

The idiom: RoFormer's self-attention (``query``/``key``/``value`` ``nn.Linear`` with bias,
``transpose_for_scores``: ``view(B, T, H, d).permute(0, 2, 1, 3)``), its sinusoidal rotary
(``RoFormerSinusoidalPositionalEmbedding``: a table ``[sin | cos]`` of ``T`` rows sliced ``[None, None]``,
``apply_rotary_position_embeddings``: ``sin``/``cos`` each ``stack([x, x], -1).reshape_as(...)`` (interleaved
pairs), ``rotate_half_query = stack([-q[..., 1::2], q[..., ::2]], -1).reshape_as(q)``), an additive extended
mask ``(1 - mask) * finfo.min`` of shape ``(B, 1, T, T)``, ``softmax(-1)``, the context permuted back and
flattened, ``RoFormerSelfOutput`` (dense, residual, LayerNorm), for a right-padded batch.

Bug (mask kind): ``bidirectional-decoder``: the decoder's mask is the padding mask broadcast over queries
(``create_bidirectional_mask``) instead of the padding AND the causal triangle."""

import sys

import torch
from torch import nn

BUGS = ("bidirectional-decoder",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def sinusoidal_table(n_pos, dim):
    position = torch.arange(n_pos, dtype=torch.float32)[:, None]
    inv = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = position * inv[None]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)                      # (P, dim): [sin | cos]


def apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer):
    sin, cos = sinusoidal_pos.chunk(2, dim=-1)
    sin_pos = torch.stack([sin, sin], dim=-1).reshape_as(sinusoidal_pos)
    cos_pos = torch.stack([cos, cos], dim=-1).reshape_as(sinusoidal_pos)
    rotate_half_query = torch.stack([-query_layer[..., 1::2], query_layer[..., ::2]], dim=-1).reshape_as(query_layer)
    query_layer = query_layer * cos_pos + rotate_half_query * sin_pos
    rotate_half_key = torch.stack([-key_layer[..., 1::2], key_layer[..., ::2]], dim=-1).reshape_as(key_layer)
    key_layer = key_layer * cos_pos + rotate_half_key * sin_pos
    return query_layer, key_layer


def create_bidirectional_mask(attention_mask, T, dtype):
    mask = attention_mask[:, None, None, :].expand(-1, 1, T, -1).bool()
    return (~mask).to(dtype) * torch.finfo(dtype).min                          # (B, 1, T, T)


def create_causal_mask(attention_mask, T, dtype):
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    mask = attention_mask[:, None, None, :].bool() & causal[None, None]
    return (~mask).to(dtype) * torch.finfo(dtype).min                          # (B, 1, T, T)


class RoFormerLayerAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, max_position=64, bug=""):
        super().__init__()
        self.bug, self.is_decoder = bug, True
        self.num_attention_heads = num_heads
        self.attention_head_size = hidden_size // num_heads
        self.all_head_size = hidden_size
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size)
        self.register_buffer("embed_positions", sinusoidal_table(max_position, self.attention_head_size))

    def transpose_for_scores(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.num_attention_heads, self.attention_head_size).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        B, T, _ = hidden_states.shape
        if self.is_decoder and self.bug != "bidirectional-decoder":
            extended = create_causal_mask(attention_mask, T, hidden_states.dtype)
        else:
            extended = create_bidirectional_mask(attention_mask, T, hidden_states.dtype)
        sinusoidal_pos = self.embed_positions[:T][None, None, :, :]
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer, key_layer = apply_rotary_position_embeddings(sinusoidal_pos, query_layer, key_layer)
        scores = torch.matmul(query_layer, key_layer.transpose(-1, -2)) / self.attention_head_size ** 0.5
        probs = torch.softmax(scores + extended, dim=-1)
        context = torch.matmul(probs, value_layer).permute(0, 2, 1, 3).contiguous()
        context = context.view(B, T, self.all_head_size)
        return self.LayerNorm(self.dense(context) + hidden_states)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = RoFormerLayerAttention(D, H, bug=bug).eval()
    lengths = torch.tensor([T] + [T - 2] * (B - 1))
    attention_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()           # (B, T), right-padded
    return model, (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
