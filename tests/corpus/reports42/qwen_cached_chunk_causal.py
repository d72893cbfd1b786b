"""QwenLM/Qwen issue #979 ("[BUG] <Qwen最新版本存在causal_mask bug，
导致在有kv_cache的情况下，多个tokens的输入会得到不同的结果>": the latest Qwen has a causal_mask bug; with a kv
cache, an input of several tokens gives different results): ``QWenAttention.forward`` in the hub's
``modeling_qwen.py`` builds ``causal_mask`` only ``if query.size(1) == key_size`` and sets it to ``None``
otherwise, which is right for one decoded token but not for a chunk of several new tokens against the cache (the
reporter fed 5 tokens at once): each of them attends to the tokens after it. The reporter changed the condition
and cut the mask to the chunk's rows ("加上causal_mask的截取"):
``tril(ones(key_size, key_size))[:, :, key_size - query_size: key_size, :key_size]``.

The idiom (Qwen-7B's ``QWenAttention`` / ``QWenBlock``): a fused ``c_attn`` ``split(split_size, dim=2)``,
``_split_heads`` a ``view`` to ``[B, T, H, d]`` (Qwen keeps tokens before heads), the rotary table
``rearrange(emb, "n d -> 1 n 1 d")`` over ``kv_seq_len = hidden_states.size(1) + past length`` (Qwen's order) cut to
the last ``cur_len`` positions, ``apply_rotary_pos_emb`` with ``_rotate_half``, the cache joined on dim 1,
``permute(0, 2, 1, 3)`` for ``_attn`` (``matmul``, ``/ sqrt(d)``, ``torch.where(causal_mask, w, min)``,
``softmax(float)``, ``matmul``, ``transpose(1, 2)``), ``_merge_heads``, ``c_proj``; RMSNorm, the ``w1 * silu(w2)``
MLP. A prefill of T tokens, then a chunk of N = 3 against the cache.

Bugs (the chunk's mask): ``causal-mask-none``: ``causal_mask = None`` when ``query.size(1) != key_size`` (the
reported code); ``causal-mask-top-left``: the mask cut as ``[:, :, :query_size, :key_size]`` (rows of the prompt's
first tokens, not of the chunk's)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("causal-mask-none", "causal-mask-top-left")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 N=3",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 N=3"}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(t, freqs):
    cos, sin = freqs
    return (t * cos) + (_rotate_half(t) * sin)                                          # (B, T, H, d)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, max_seq_len):
        seq = torch.arange(max_seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.outer(seq, self.inv_freq)
        emb = rearrange(torch.cat((freqs, freqs), dim=-1), "n d -> 1 n 1 d")           # (1, K, 1, d)
        return [emb.cos(), emb.sin()]


class QWenAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.split_size, self.bug = num_heads, hidden_size // num_heads, hidden_size, bug
        self.c_attn = nn.Linear(hidden_size, 3 * hidden_size)
        self.c_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def _split_heads(self, tensor):
        return tensor.view(tensor.size()[:-1] + (self.num_heads, self.head_dim))       # (B, T, H, d)

    def _merge_heads(self, tensor):
        tensor = tensor.contiguous()
        return tensor.view(tensor.size()[:-2] + (self.num_heads * self.head_dim,))     # (B, T, D)

    def _attn(self, query, key, value, causal_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))                       # (B, H, T, K)
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype)
        if causal_mask is not None:
            attn_weights = torch.where(causal_mask, attn_weights, torch.finfo(attn_weights.dtype).min)
        attn_weights = F.softmax(attn_weights.float(), dim=-1).type(value.dtype)
        return torch.matmul(attn_weights, value).transpose(1, 2)                        # (B, T, H, d)

    def forward(self, hidden_states, rotary_pos_emb, layer_past=None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        cur_len = query.shape[1]
        q_pos_emb = [i[:, -cur_len:, :, :] for i in rotary_pos_emb]                    # (1, T, 1, d)
        query, key = apply_rotary_pos_emb(query, q_pos_emb), apply_rotary_pos_emb(key, q_pos_emb)
        if layer_past is not None:
            key = torch.cat((layer_past[0], key), dim=1)                                # (B, P+T, H, d)
            value = torch.cat((layer_past[1], value), dim=1)
        present = (key, value)
        key_size, query_size = key.size(1), query.size(1)
        causal_mask = torch.tril(torch.ones((key_size, key_size), dtype=torch.bool)).view(1, 1, key_size, key_size)
        if self.bug == "causal-mask-none" and query_size != key_size:
            causal_mask = None
        elif self.bug == "causal-mask-top-left":
            causal_mask = causal_mask[:, :, :query_size, :key_size]
        else:
            causal_mask = causal_mask[:, :, key_size - query_size: key_size, :key_size]
        query, key, value = query.permute(0, 2, 1, 3), key.permute(0, 2, 1, 3), value.permute(0, 2, 1, 3)
        attn_output = self._attn(query, key, value, causal_mask)
        return self.c_proj(self._merge_heads(attn_output)), present


class QWenBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.ln_1, self.ln_2 = RMSNorm(hidden_size), RMSNorm(hidden_size)
        self.attn = QWenAttention(hidden_size, num_heads, bug)
        self.w1 = nn.Linear(hidden_size, 2 * hidden_size, bias=False)
        self.w2 = nn.Linear(hidden_size, 2 * hidden_size, bias=False)
        self.mlp_c_proj = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.rotary_emb = RotaryEmbedding(hidden_size // num_heads)

    def forward(self, hidden_states, layer_past=None):
        kv_seq_len = hidden_states.size(1) + (0 if layer_past is None else layer_past[0].shape[1])
        attn_output, present = self.attn(self.ln_1(hidden_states), self.rotary_emb(kv_seq_len), layer_past)
        hidden_states = hidden_states + attn_output
        h = self.ln_2(hidden_states)
        return hidden_states + self.mlp_c_proj(self.w1(h) * F.silu(self.w2(h))), present


class QWenModel(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.h = QWenBlock(hidden_size, num_heads, bug)

    def forward(self, prompt, chunk):                                                   # (B, T, D), (B, N, D)
        _, past = self.h(prompt)
        out, _ = self.h(chunk, past)
        return out                                                                      # (B, N, D)


def build(bug="", B=2, T=6, D=32, H=4, N=3):
    torch.manual_seed(0)
    return QWenModel(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, N, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
