"""MemTensor/MemOS issue #2315 ("KVCacheMemory._concat_caches merges KV fragments without re-rotating them to
their new positions", with PR #2304 re-rotating them): each activation memory is a key/value cache prefilled on
its own, so its keys carry rotary phases for positions ``0 … L-1`` of that fragment; ``_concat_caches`` joined
two fragments with a bare ``torch.cat(dim=-2)``, moving the second fragment's keys into slots ``L1 … L1+L2-1``
while their phases still said ``0 … L2-1``. Every token read after the merge saw wrong relative distances to
the second fragment. The fix re-rotates the moved keys by the offset they land at (rotations compose:
rotating a key rotated at ``p`` by ``L1`` more gives the key at ``p + L1``).

The idiom (transformers' Qwen2 attention, which the memories come from): ``q_proj``/``k_proj``/``v_proj`` with
bias, ``view(B, T, -1, head_dim).transpose(1, 2)``, ``Qwen2RotaryEmbedding`` (``inv_freq``, ``cos``/``sin`` of
``position_ids``), ``apply_rotary_pos_emb`` with ``rotate_half``, the rotated keys written to the cache, eager
attention ``matmul * scaling``, softmax in float32, ``o_proj``. Two fragments of T tokens are prefilled at
positions ``0 … T-1`` each, merged, and one new token is decoded at position ``2T`` over the merged cache.

Bug (argument): ``concat-unrotated``: the second fragment's keys concatenated without re-rotation."""

import sys

import torch
from torch import nn

BUGS = ("concat-unrotated",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * cos) + (rotate_half(x) * sin)


class Qwen2RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Qwen2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.rotary_emb = Qwen2RotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, position_ids, past_key_value=None):
        bsz, q_len, _ = hidden_states.shape
        shape = (bsz, q_len, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states = apply_rotary_pos_emb(query_states, cos, sin)
        key_states = apply_rotary_pos_emb(key_states, cos, sin)
        if past_key_value is not None:
            key_states = torch.cat([past_key_value[0], key_states], dim=-2)
            value_states = torch.cat([past_key_value[1], value_states], dim=-2)
        present = (key_states, value_states)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        if past_key_value is None:
            causal = torch.ones(q_len, q_len, dtype=torch.bool).triu(1)
            attn_weights = attn_weights.masked_fill(causal, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), present


class KVCacheMemory(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.self_attn = Qwen2Attention(hidden_size, num_heads)

    def prefill(self, fragment):
        position_ids = torch.arange(fragment.shape[1]).unsqueeze(0).expand(fragment.shape[0], -1)
        return self.self_attn(fragment, position_ids)[1]

    def _concat_caches(self, first, second):
        keys2 = second[0]
        if self.bug != "concat-unrotated":
            offset = torch.full((keys2.shape[0], keys2.shape[2]), first[0].shape[2])
            cos, sin = self.self_attn.rotary_emb(keys2, offset)
            keys2 = apply_rotary_pos_emb(keys2, cos, sin)                         # phases moved by L1
        return torch.cat([first[0], keys2], dim=-2), torch.cat([first[1], second[1]], dim=-2)

    def forward(self, fragment1, fragment2, new_token):
        merged = self._concat_caches(self.prefill(fragment1), self.prefill(fragment2))
        past_len = merged[0].shape[2]
        position_ids = torch.arange(past_len, past_len + new_token.shape[1]).unsqueeze(0)
        position_ids = position_ids.expand(new_token.shape[0], -1)
        return self.self_attn(new_token, position_ids, merged)[0]


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = KVCacheMemory(D, H, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
