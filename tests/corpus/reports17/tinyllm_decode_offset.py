"""skyzh/tiny-llm pull request #46 ("fix: Add flash attention option and fix token offset"): in
``simple_generate_with_kv_cache`` the offset passed to the model (the rotary positions of the step's tokens)
advanced by the size of the prompt after the first decoding step, so the offsets ran 6, 12, 13, ... instead of
6, 7, 8, ...: from the second decoding step on, each new token was rotated for a position five past the one its
key took in the cache. The fix advances the offset by the one token decoded.

The idiom (tiny-llm's Qwen2, written here in torch for MLX): ``RoPE`` with precomputed ``cos_freqs``/``sin_freqs``
indexed by ``slice(offset, offset + L)`` and the non-traditional half split, ``Qwen2MultiHeadAttention`` (``wq``
/``wk``/``wv`` with biases, ``reshape(B, L, H, D)``, the rotation, ``transpose(0, 2, 1, 3)``, the cache's
``update_and_fetch`` joining the keys on the token axis, ``scaled_dot_product_attention_grouped`` (the query
``reshape(B, H_kv, n_repeats, L, D)`` against keys ``(B, H_kv, 1, S, D)``, ``causal_mask(L, S)`` at the
prefill), ``wo``). The model runs a prefill of T embedded tokens and two decoding steps.

Bug (argument): ``offset-by-prompt``: the offset advanced by the prompt's length after the first decoding
step."""

import sys

import torch
from torch import nn

BUGS = ("offset-by-prompt",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


class RoPE:
    def __init__(self, dims, seq_len, base=10000):
        half_dims = dims // 2
        inner = torch.arange(0, half_dims, dtype=torch.float32) / half_dims
        freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), base ** -inner)       # (L, D/2)
        self.half_dims, self.cos_freqs, self.sin_freqs = half_dims, freqs.cos(), freqs.sin()

    def __call__(self, x, offset):
        n, s, h, d = x.shape
        cos_basis = self.cos_freqs[offset].reshape(1, s, 1, self.half_dims)
        sin_basis = self.sin_freqs[offset].reshape(1, s, 1, self.half_dims)
        x1, x2 = x[..., :self.half_dims], x[..., self.half_dims:]
        real = x1 * cos_basis - x2 * sin_basis
        imag = x2 * cos_basis + x1 * sin_basis
        return torch.cat([real, imag], dim=-1)


class TinyKvFullCache:
    def __init__(self):
        self.key_values = None

    def update_and_fetch(self, key, value):
        if self.key_values is not None:
            key = torch.cat([self.key_values[0], key], dim=2)                                  # (B, H_kv, S, D)
            value = torch.cat([self.key_values[1], value], dim=2)
        self.key_values = (key, value)
        return key, value


def causal_mask(L, S):
    mask = torch.tril(torch.ones(L, S, dtype=torch.bool), diagonal=S - L)
    return torch.where(mask, 0.0, float("-inf"))


def scaled_dot_product_attention_grouped(query, key, value, scale, mask=None):
    expected_shape = query.shape
    b, h_q, L, d = query.shape
    h, S = key.shape[1], key.shape[2]
    n_repeats = h_q // h
    query = query.reshape(b, h, n_repeats, L, d)
    key, value = key.reshape(b, h, 1, S, d), value.reshape(b, h, 1, S, d)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if mask == "causal":
        scores = scores + causal_mask(L, S)
    result = torch.matmul(torch.softmax(scores, dim=-1), value)
    return result.reshape(expected_shape)


class Qwen2MultiHeadAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, max_seq_len=64):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, hidden_size // num_heads
        self.scale = self.head_dim ** -0.5
        self.wq = nn.Linear(hidden_size, num_heads * self.head_dim)
        self.wk = nn.Linear(hidden_size, num_kv_heads * self.head_dim)
        self.wv = nn.Linear(hidden_size, num_kv_heads * self.head_dim)
        self.wo = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.rope = RoPE(self.head_dim, max_seq_len)

    def forward(self, x, offset, cache, mask=None):
        B, L, _ = x.shape
        projection_q = self.wq(x).reshape(B, L, self.num_heads, self.head_dim)
        projection_k = self.wk(x).reshape(B, L, self.num_kv_heads, self.head_dim)
        projection_v = self.wv(x).reshape(B, L, self.num_kv_heads, self.head_dim)
        projection_q = self.rope(projection_q, offset=slice(offset, offset + L))              # [rope]
        projection_k = self.rope(projection_k, offset=slice(offset, offset + L))              # [rope]
        projection_q = projection_q.transpose(1, 2)
        projection_k, projection_v = projection_k.transpose(1, 2), projection_v.transpose(1, 2)
        projection_k, projection_v = cache.update_and_fetch(projection_k, projection_v)
        x = scaled_dot_product_attention_grouped(projection_q, projection_k, projection_v, self.scale, mask)
        x = x.transpose(1, 2).reshape(B, L, -1)
        return self.wo(x)


class Qwen2Generator(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.attn = Qwen2MultiHeadAttention(hidden_size, num_heads, num_kv_heads)

    def forward(self, prompt, first, second):                                                # (B,T,D), (B,1,D) x2
        cache, offset = TinyKvFullCache(), 0
        self.attn(prompt, offset, cache, mask="causal")
        offset += prompt.shape[1]
        self.attn(first, offset, cache)
        if self.bug == "offset-by-prompt":
            offset += prompt.shape[1]                                                        # [offset]
        else:
            offset += first.shape[1]                                                         # [offset]
        return self.attn(second, offset, cache)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    return Qwen2Generator(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
