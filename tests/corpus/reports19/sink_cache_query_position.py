"""huggingface/transformers issue #35350 ("SinkCache (StreamLLM) implemented over Post-RoPE Key cache might
result in confused position for inference", labelled bug): once the attention-sink cache is full, the keys it
keeps are re-based to their index in the cache (sinks at 0 .. S-1, the recent window right after), but the new
token's query was still rotated at its absolute position N (the count of tokens seen), so the distance from
the query to every cached key was off by the number of evicted tokens. StreamingLLM's own implementation
(mit-han-lab/streaming-llm, ``pos_shift/modify_llama.py``) rotates the query at its index in the cache too:
"query pos is min(cache_size, idx)", "key pos is the pos in cache".

The idiom (StreamingLLM's ``llama_pos_shift_attention_forward`` with its ``StartRecentKVCache``): Llama's
``q_proj``/``k_proj``/``v_proj``, ``view(bsz, q_len, num_heads, head_dim).transpose(1, 2)``, the rotary table
``cat((freqs, freqs))`` with ``rotate_half``; the keys cached before the rotation, joined on axis 2, rotated
at ``arange(kv_seq_len)`` each step; the cache evicted to ``start_size`` sinks plus the ``recent_size`` newest
tokens (``cat([k[:, :, :start], k[:, :, L - recent:]], dim=2)``); scores ``/ sqrt(head_dim)``, a causal mask
at the prefill, ``softmax(dim=-1)``, ``o_proj``. A prefill of T tokens, then two decoding steps of one token
each (teacher-forced embeddings).

Bug (argument): ``absolute-query-position``: the decoding query rotated at the number of tokens seen (the
keys at their index in the cache)."""

import math
import sys

import torch
from torch import nn

BUGS = ("absolute-query-position",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb_single(x, cos, sin, position_ids):
    cos, sin = cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)             # (1, 1, L, d)
    return (x * cos) + (rotate_half(x) * sin)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=64, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_position_embeddings, dtype=torch.float32)
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, seq_len):
        return self.cos_cached[:seq_len], self.sin_cached[:seq_len]


class StartRecentKVCache:
    def __init__(self, start_size, recent_size):
        self.start_size, self.recent_size = start_size, recent_size

    def __call__(self, past_key_value):
        k, v = past_key_value
        seq_len = k.size(2)
        if seq_len <= self.start_size + self.recent_size:
            return past_key_value
        return (torch.cat([k[:, :, :self.start_size], k[:, :, seq_len - self.recent_size:]], dim=2),
                torch.cat([v[:, :, :self.start_size], v[:, :, seq_len - self.recent_size:]], dim=2))


class LlamaPosShiftAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, past_key_value=None, seen_tokens=0):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        past_len = past_key_value[0].shape[-2] if past_key_value is not None else 0
        kv_seq_len = past_len + q_len
        cos, sin = self.rotary_emb(seq_len=seen_tokens + q_len)
        if self.bug == "absolute-query-position":
            position_ids = torch.arange(seen_tokens, seen_tokens + q_len)[None]                # [query-positions]
        else:
            position_ids = torch.arange(past_len, past_len + q_len)[None]                      # [query-positions]
        query_states = apply_rotary_pos_emb_single(query_states, cos, sin, position_ids)
        if past_key_value is not None:
            key_states = torch.cat([past_key_value[0], key_states], dim=2)
            value_states = torch.cat([past_key_value[1], value_states], dim=2)
        past_key_value = (key_states, value_states)
        key_position_ids = torch.arange(kv_seq_len)[None]
        key_states = apply_rotary_pos_emb_single(key_states, cos, sin, key_position_ids)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if q_len > 1:
            causal = torch.ones(q_len, kv_seq_len, dtype=torch.bool).tril(kv_seq_len - q_len)
            attn_weights = attn_weights.masked_fill(~causal, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states)                                 # [attn]
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), past_key_value


class StreamingDecoder(nn.Module):
    def __init__(self, hidden_size, num_heads, start_size=1, recent_size=3, bug=""):
        super().__init__()
        self.self_attn = LlamaPosShiftAttention(hidden_size, num_heads, bug)
        self.kv_cache = StartRecentKVCache(start_size, recent_size)

    def forward(self, prompt, next_tokens):
        outputs, past_key_value, seen_tokens = [], None, 0
        for chunk in (prompt, *next_tokens.split(1, dim=1)):
            out, past_key_value = self.self_attn(chunk, past_key_value, seen_tokens)
            seen_tokens += chunk.shape[1]
            past_key_value = self.kv_cache(past_key_value)
            outputs.append(out)
        return torch.cat(outputs, dim=1)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return StreamingDecoder(D, H, recent_size=T - 3, bug=bug).eval(), (torch.randn(B, T, D), torch.randn(B, 2, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
