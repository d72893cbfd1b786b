"""huggingface/transformers, src/transformers/models/mixtral/modeling_mixtral.py (v4.40, ``MixtralAttention``,
``MixtralRotaryEmbedding``, ``repeat_kv`` and the sliding-window causal mask of
``_prepare_4d_causal_attention_mask_with_cache_position``): ``q_proj`` to ``H * d``, ``k_proj``/``v_proj`` to
``H_kv * d``, each ``view(B, T, -1, d).transpose(1, 2)``; rotary (``rotate_half``, base 1e6); ``repeat_kv`` (each
key/value head expanded ``n_rep`` times next to itself, ``(B, H_kv, n_rep, T, d) -> (B, H, T, d)``); ``matmul(q,
k.transpose(2, 3)) / sqrt(d)``; the causal mask with the sliding window (a key is hidden where it is in the future
or ``q_idx - kv_idx >= sliding_window``); ``softmax(dtype=float32)``, ``matmul`` with v, ``transpose(1, 2)``,
``reshape(B, T, -1)``, ``o_proj``.

Bugs: ``kv-heads-tiled``: ``repeat_kv`` written ``k.repeat(1, n_rep, 1, 1)`` (the key/value heads tiled
``0 1 0 1`` rather than interleaved ``0 0 1 1``: query head 1 reads key head 1 instead of 0, the slip of ports
that reach for ``repeat`` where ``repeat_interleave`` is meant); ``window-off-by-one``: the window written
``q_idx - kv_idx > sliding_window`` (each query sees ``sliding_window + 1`` keys: the natural off-by-one between
``>`` and ``>=`` when a window is written as the keys it hides)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep, bug=""):
    if bug == "kv-heads-tiled":
        return hidden_states.repeat(1, n_rep, 1, 1)
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class MixtralRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=1_000_000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, position_ids):                                                # (B, T)
        inv_freq = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)      # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class MixtralAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim = heads, kv_heads, dim // heads
        self.num_key_value_groups, self.bug = heads // kv_heads, bug
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.rotary_emb = MixtralRotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, causal_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        key_states = repeat_kv(key_states, self.num_key_value_groups, self.bug)
        value_states = repeat_kv(value_states, self.num_key_value_groups, self.bug)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim ** 0.5
        attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class MixtralModel(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug="", layers=2, sliding_window=3):
        super().__init__()
        self.bug, self.sliding_window = bug, sliding_window
        self.layers = nn.ModuleList(MixtralAttention(dim, heads, kv_heads, bug) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def causal_mask(self, T, dtype):
        cache_position = torch.arange(T)
        q_idx, kv_idx = cache_position[:, None], torch.arange(T)[None, :]
        hidden = kv_idx > q_idx
        if self.bug == "window-off-by-one":
            hidden |= (q_idx - kv_idx) > self.sliding_window
        else:
            hidden |= (q_idx - kv_idx) >= self.sliding_window
        return torch.full((T, T), torch.finfo(dtype).min).masked_fill(~hidden, 0.0)[None, None]

    def forward(self, inputs_embeds):                                               # (B, T, D)
        B, T, _ = inputs_embeds.shape
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        mask = self.causal_mask(T, inputs_embeds.dtype)
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = hidden_states + layer(self.norm(hidden_states), mask, position_ids)
        return hidden_states


BUGS = ("kv-heads-tiled", "window-off-by-one")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return MixtralModel(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
