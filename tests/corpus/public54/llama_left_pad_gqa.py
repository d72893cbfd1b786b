"""huggingface/transformers, src/transformers/models/llama/modeling_llama.py (``LlamaAttention``,
``LlamaRotaryEmbedding``, ``rotate_half``, ``apply_rotary_pos_emb``, ``repeat_kv``, ``eager_attention_forward``;
v4.48-4.50, 2025) with the 4-D mask of ``_prepare_4d_causal_attention_mask_with_cache_position``: q, k, v
``view(hidden_shape).transpose(1, 2)`` with ``hidden_shape = (*input_shape, -1, head_dim)`` (keys and values with
``num_key_value_heads``); ``cos, sin`` ``[B, T, head_dim]`` from ``position_ids`` (the left padding's
``attention_mask.long().cumsum(-1) - 1``, ``masked_fill_(attention_mask == 0, 1)``, as ``generate`` makes them),
``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``; ``repeat_kv`` by ``hidden_states[:, :, None, :, :]
.expand(batch, num_key_value_heads, n_rep, slen, head_dim).reshape(batch, num_key_value_heads * n_rep, slen,
head_dim)``; the causal mask ``torch.full((T, T), min).triu(1)`` ``[B, 1, T, T]`` whose padding is added by
``padding_mask = causal_mask + attention_mask[:, None, None, :]`` and ``causal_mask.masked_fill(padding_mask == 0,
min)``; the scores plus ``causal_mask[:, :, :, : key_states.shape[-2]]``, softmax in float32, ``attn_output
.transpose(1, 2).contiguous()``, ``reshape(*input_shape, -1)``, ``o_proj``.

Bugs: ``padding-mask-not-inverted``: the padding written as an additive mask by hand,
``causal_mask + attention_mask[:, None, None, :] * min`` (the 1s of the attention mask are the real tokens: the
real keys are hidden, the left pads kept); ``lengths-mask-assumes-right-padding``: the padding built from the
lengths ``attention_mask.sum(-1)`` as ``arange(T) < lengths`` (right padding assumed while the batch is padded on
the left: the real tokens at the end are hidden, the pads at the start kept)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)                                               # (B, 1, T, d)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, T, d)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)   # (B, d/2, 1)
        position_ids_expanded = position_ids[:, None, :].float()                     # (B, 1, T)
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)          # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                      # (B, T, d)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def causal_mask_4d(attention_mask, dtype, bug=""):
    batch_size, sequence_length = attention_mask.shape
    min_dtype = torch.finfo(dtype).min
    causal_mask = torch.full((sequence_length, sequence_length), min_dtype, dtype=dtype).triu(1)   # (T, T)
    causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1).clone()  # (B, 1, T, T)
    if bug == "padding-mask-not-inverted":
        return causal_mask + attention_mask[:, None, None, :].to(dtype) * min_dtype
    if bug == "lengths-mask-assumes-right-padding":
        lengths = attention_mask.sum(-1)                                             # (B,)
        keep = torch.arange(sequence_length)[None, :] < lengths[:, None]             # (B, T)
        return causal_mask.masked_fill(~keep[:, None, None, :], min_dtype)
    padding_mask = causal_mask + attention_mask[:, None, None, :].to(dtype)          # (B, 1, T, T)
    padding_mask = padding_mask == 0
    return causal_mask.masked_fill(padding_mask, min_dtype)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads):
        super().__init__()
        self.head_dim = hidden_size // num_attention_heads
        self.num_key_value_groups = num_attention_heads // num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_attention_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)   # (B, H, T, d)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)     # (B, H_kv, T, d)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)   # (B, H_kv, T, d)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        key_states = repeat_kv(key_states, self.num_key_value_groups)               # (B, H, T, d)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling   # (B, H, T, T)
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                       # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).contiguous()                       # (B, T, H, d)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()             # (B, T, D)
        return self.o_proj(attn_output)


class LlamaLayerAttention(nn.Module):
    """What ``LlamaModel.forward`` does around one attention: positions, rotary tables, the 4-D mask."""

    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, bug=""):
        super().__init__()
        self.rotary_emb = LlamaRotaryEmbedding(hidden_size // num_attention_heads)
        self.self_attn = LlamaAttention(hidden_size, num_attention_heads, num_key_value_heads)
        self.bug = bug

    def forward(self, inputs_embeds, attention_mask):
        position_ids = attention_mask.long().cumsum(-1) - 1                          # (B, T)
        position_ids.masked_fill_(attention_mask == 0, 1)
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
        causal_mask = causal_mask_4d(attention_mask, inputs_embeds.dtype, self.bug)  # (B, 1, T, T)
        return self.self_attn(inputs_embeds, position_embeddings, causal_mask)


BUGS = ("padding-mask-not-inverted", "lengths-mask-assumes-right-padding")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)
EQUAL = {"B=2 T=6 D=32 H=4 H_kv=2": "B=4 T=4 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, :2] = 0                                                       # the later prompts left-padded
    inputs = (torch.randn(B, T, D), attention_mask)
    return LlamaLayerAttention(D, H, H_kv, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
