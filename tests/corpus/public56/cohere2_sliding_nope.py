"""huggingface/transformers, src/transformers/models/cohere2/modeling_cohere2.py (``Cohere2RotaryEmbedding``,
``rotate_half``, ``apply_rotary_pos_emb``, ``repeat_kv``, ``eager_attention_forward``, ``Cohere2Attention``,
``Cohere2DecoderLayer.forward``, ``Cohere2Model._prepare_4d_causal_attention_mask_with_cache_position``; v4.50-4.52,
Command R7B): the rotary table ``torch.repeat_interleave(freqs, 2, dim=-1)`` ("diff from Llama: we interleave()
instead of cat()") for the interleaved ``rotate_half`` (``x[..., ::2]``, ``x[..., 1::2]``, ``torch.stack([-x2, x1],
dim=-1).flatten(-2)``); ``self.sliding_window = config.sliding_window if (layer_idx + 1) %
config.sliding_window_pattern != 0 else None`` and the rotary applied only ``if self.sliding_window is not None``
(the global layers use no positions at all); in the sliding layers the 4-D mask further hidden by
``torch.where(torch.tril(ones_like(attention_mask, dtype=bool), diagonal=-self.sliding_window), min_dtype,
attention_mask)`` and sliced ``[:, :, :, offset : offset + effective_seq_len]``; the 4-D causal mask made with its
padding (``full(min).triu(1)``, ``* (arange(target) > cache_position.reshape(-1, 1))``, ``padding_mask ==
0``); GQA by ``repeat_kv``; a parallel block (``residual + attention``; the MLP left out). Two layers with
``sliding_window_pattern = 2`` (Command R7B: 4): layer 0 slides with RoPE, layer 1 is global without it. Entry 1
left-padded, ``position_ids`` as ``generate`` makes them (``cumsum(-1) - 1``).

Bugs: ``rope-table-cat``: ``emb = torch.cat((freqs, freqs), dim=-1)`` (Llama's table kept when the model's
``rotate_half`` was made Cohere's: the features 2i and 2i + 1 that rotate together get the frequencies of i mod d/2
and of (2i + 1) mod d/2, two different angles, so the pair is not rotated and the score is no longer a function of
the distance); ``sliding-diagonal-positive``: ``torch.tril(..., diagonal=self.sliding_window)`` (the minus sign
dropped: every key up to w after each query is hidden, so every entry of the sliding layers' rows is ``min_dtype`` and
their softmax spreads evenly over all keys, later tokens and padding included)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)                                # (B, H, T, d)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)                                               # (B, 1, T, d)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)   # (B, H, T, d)


class Cohere2RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0, bug=""):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim)))
        self.bug = bug

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)   # (B, d/2, 1)
        position_ids_expanded = position_ids[:, None, :].float()                     # (B, 1, T)
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)          # (B, T, d/2)
        if self.bug == "rope-table-cat":
            emb = torch.cat((freqs, freqs), dim=-1)                                  # (B, T, d)
        else:
            emb = torch.repeat_interleave(freqs, 2, dim=-1)                          # (B, T, d)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Cohere2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, layer_idx, sliding_window=3, sliding_window_pattern=2):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.sliding_window = sliding_window if (layer_idx + 1) % sliding_window_pattern != 0 else None

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)   # (B, H, T, d)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)     # (B, H_kv, T, d)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)   # (B, H_kv, T, d)
        cos, sin = position_embeddings
        if self.sliding_window is not None:
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        key_states = repeat_kv(key_states, self.num_key_value_groups)               # (B, H, T, d)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling   # (B, H, T, T)
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()   # (B, T, H, d)
        return self.o_proj(attn_output.reshape(*input_shape, -1).contiguous())       # (B, T, D)


class Cohere2DecoderLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, layer_idx, bug=""):
        super().__init__()
        self.self_attn = Cohere2Attention(hidden_size, num_heads, num_kv_heads, layer_idx)
        self.input_layernorm = nn.LayerNorm(hidden_size, bias=False)
        self.sliding_window = self.self_attn.sliding_window
        self.bug = bug

    def forward(self, hidden_states, position_embeddings, attention_mask, cache_position, last_cache_position):
        if self.sliding_window is not None:
            effective_seq_len = max(cache_position.shape[0], self.sliding_window)
            min_dtype = torch.finfo(hidden_states.dtype).min
            diagonal = self.sliding_window if self.bug == "sliding-diagonal-positive" else -self.sliding_window
            sliding_window_mask = torch.tril(torch.ones_like(attention_mask, dtype=torch.bool), diagonal=diagonal)
            attention_mask = torch.where(sliding_window_mask, min_dtype, attention_mask)   # (B, 1, T, T)
            offset = max(0, last_cache_position - effective_seq_len)
            attention_mask = attention_mask[:, :, :, offset: offset + effective_seq_len]
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        return residual + self.self_attn(hidden_states, position_embeddings, attention_mask)


class Cohere2Model(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.layers = nn.ModuleList(Cohere2DecoderLayer(hidden_size, num_heads, num_kv_heads, i, bug) for i in range(2))
        self.rotary_emb = Cohere2RotaryEmbedding(hidden_size // num_heads, bug=bug)

    def forward(self, inputs_embeds, attention_mask):
        batch_size, sequence_length = attention_mask.shape
        cache_position = torch.arange(sequence_length)
        position_ids = attention_mask.long().cumsum(-1) - 1                          # (B, T)
        position_ids.masked_fill_(attention_mask == 0, 1)
        min_dtype = torch.finfo(inputs_embeds.dtype).min
        causal_mask = torch.full((sequence_length, sequence_length), fill_value=min_dtype)   # (T, T)
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask *= torch.arange(sequence_length) > cache_position.reshape(-1, 1)
        causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1).clone()   # (B, 1, T, T)
        padding_mask = causal_mask + attention_mask[:, None, None, :].to(causal_mask.dtype)
        causal_mask = causal_mask.masked_fill(padding_mask == 0, min_dtype)
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
        hidden_states = inputs_embeds
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, position_embeddings, causal_mask, cache_position,
                                          attention_mask.shape[-1])
        return hidden_states


BUGS = ("rope-table-cat", "sliding-diagonal-positive")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, :2] = 0                                                       # the later prompts left-padded
    return Cohere2Model(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
