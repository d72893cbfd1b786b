"""mit-han-lab/streaming-llm, ``streaming_llm/kv_cache.py`` (``StartRecentKVCache``) and
``streaming_llm/pos_shift/modify_llama.py`` (``llama_pos_shift_attention_forward``, 2023): the cache keeps the
first ``start_size`` tokens (the attention sinks) and the last ``recent_size``, joined by ``torch.cat([k_slice(k,
0, start), k_slice(k, seq_len - recent, seq_len)], dim=k_seq_dim)`` with ``k_seq_dim = 2`` for Llama's ``(B, H,
S, d)``; keys are cached before the rotary and rotated at their place in the cache (``key_position_ids =
arange(kv_seq_len)``), the query at the last place; ``repeat_kv`` left out (as many key heads as query heads);
``softmax(dim=-1, dtype=float32)``; ``o_proj``. Here the past ``T`` tokens are projected into the cache, which
is then evicted to 2 sinks + 3 recent, and one new token attends.

Bugs (argument): ``evict-along-heads``: the cache made with ``k_seq_dim=1`` (the value for a ``(B, S, H, d)``
cache, the setting the repository asks one to choose per model: here it slices the heads, the tokens are never
evicted); ``recent-from-the-start``: the recent slice taken ``k_slice(k, start, start + recent)`` (the tokens
right after the sinks instead of the last ones)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def slice_along(x, start, end, dim):
    return x.narrow(dim, start, max(min(end, x.size(dim)) - start, 0))


class StartRecentKVCache:
    def __init__(self, start_size=2, recent_size=3, k_seq_dim=2, v_seq_dim=2, bug=""):
        self.start_size, self.recent_size, self.bug = start_size, recent_size, bug
        self.k_seq_dim, self.v_seq_dim = k_seq_dim, v_seq_dim

    def __call__(self, k, v):
        seq_len = k.size(self.k_seq_dim)
        if seq_len <= self.start_size + self.recent_size:
            return k, v
        lo = self.start_size if self.bug == "recent-from-the-start" else seq_len - self.recent_size
        hi = lo + self.recent_size
        k = torch.cat([slice_along(k, 0, self.start_size, self.k_seq_dim),
                       slice_along(k, lo, hi, self.k_seq_dim)], dim=self.k_seq_dim)
        v = torch.cat([slice_along(v, 0, self.start_size, self.v_seq_dim),
                       slice_along(v, lo, hi, self.v_seq_dim)], dim=self.v_seq_dim)
        return k, v


class PosShiftAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        seq_dim = 1 if bug == "evict-along-heads" else 2
        self.kv_cache = StartRecentKVCache(k_seq_dim=seq_dim, v_seq_dim=seq_dim, bug=bug)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def shape(self, x):
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def rotary(self, x, position_ids):
        freqs = torch.outer(position_ids.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos()[None, None] + rotate_half(x) * emb.sin()[None, None]

    def forward(self, past, hidden_states):
        past_k, past_v = self.kv_cache(self.shape(self.k_proj(past)), self.shape(self.v_proj(past)))
        bsz, q_len, _ = hidden_states.size()
        query_states = self.shape(self.q_proj(hidden_states))
        key_states = torch.cat([past_k, self.shape(self.k_proj(hidden_states))], dim=2)
        value_states = torch.cat([past_v, self.shape(self.v_proj(hidden_states))], dim=2)
        kv_seq_len = key_states.shape[-2]
        query_states = self.rotary(query_states, torch.arange(kv_seq_len - q_len, kv_seq_len))
        key_states = self.rotary(key_states, torch.arange(kv_seq_len))
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim**0.5
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


BUGS = ("evict-along-heads", "recent-from-the-start")
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    return PosShiftAttention(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
