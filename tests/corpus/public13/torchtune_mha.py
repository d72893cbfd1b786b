"""pytorch/torchtune, torchtune/modules/attention.py (v0.3, ``MultiHeadAttention``), torchtune/modules/kv_cache.py
(``KVCache.update``: ``k_out[:, :, input_pos] = k_val``) and torchtune/modules/position_embeddings.py
(``RotaryPositionalEmbeddings``: a cache ``(max_seq_len, d/2, 2)`` of ``stack([cos, sin], -1)``; ``forward(x,
input_pos)`` expects ``[b, s, n_h, h_d]``: ``seq_len = x.size(1)``, ``rope_cache = self.cache[:seq_len]`` or
``self.cache[input_pos]``, ``xshaped = x.float().reshape(*x.shape[:-1], -1, 2)``, ``rope_cache.view(-1,
xshaped.size(1), 1, xshaped.size(3), 2)``, the pairs rotated and ``flatten(3)``): q/k/v projections viewed
``(b, s, n, h_d)``, the position embedding applied before ``transpose(1, 2)``, the cache updated at
``input_pos``, grouped keys widened ``k.unsqueeze(2).expand(b, n_kv, q_per_kv, s, h_d).flatten(1, 2)``,
``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` over the whole cache (the mask's rows cut to the
prompt, ``causal_mask[None, None, :T]``: keys past the prompt hidden), ``output_proj``; a prefill of T tokens
with ``input_pos=None`` (the cache's slice ``[:seq_len]``).

Bugs (argument): ``rope-after-transpose``: ``pos_embeddings`` applied after ``transpose(1, 2)`` (``[b, n_h, s,
h_d]`` handed to a module that reads ``x.size(1)`` as the sequence length: the rotation then follows the head
index, not the position, and raises nothing; torchtune's docstring warns of exactly this layout)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class RotaryPositionalEmbeddings(nn.Module):
    def __init__(self, dim, max_seq_len=32, base=10_000):
        super().__init__()
        theta = 1.0 / (base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        idx_theta = torch.einsum("i, j -> ij", torch.arange(max_seq_len).float(), theta)   # (S, d/2)
        self.register_buffer("cache", torch.stack([idx_theta.cos(), idx_theta.sin()], dim=-1), persistent=False)

    def forward(self, x, input_pos=None):                                             # [b, s, n_h, h_d]
        seq_len = x.size(1)
        rope_cache = self.cache[:seq_len] if input_pos is None else self.cache[input_pos]
        xshaped = x.float().reshape(*x.shape[:-1], -1, 2)                              # (b, s, n, d/2, 2)
        rope_cache = rope_cache.view(-1, xshaped.size(1), 1, xshaped.size(3), 2)       # (1, s, 1, d/2, 2)
        x_out = torch.stack([xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],
                             xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1]], -1)
        return x_out.flatten(3).type_as(x)


class KVCache(nn.Module):
    def __init__(self, batch_size, max_seq_len, num_kv_heads, head_dim):
        super().__init__()
        shape = (batch_size, num_kv_heads, max_seq_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

        self.register_buffer("cache_pos", torch.arange(max_seq_len), persistent=False)

    def update(self, k_val, v_val):                                                   # (b, n_kv, s, h_d)
        seq_len = k_val.shape[2]
        self.k_cache[:, :, self.cache_pos[:seq_len]] = k_val
        self.v_cache[:, :, self.cache_pos[:seq_len]] = v_val
        self.cache_pos.add_(seq_len)
        return self.k_cache, self.v_cache


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, batch_size, max_seq_len, bug=""):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, embed_dim // num_heads
        self.bug = bug
        self.q_proj = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.output_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.pos_embeddings = RotaryPositionalEmbeddings(self.head_dim, max_seq_len)
        self.kv_cache = KVCache(batch_size, max_seq_len, num_kv_heads, self.head_dim)

    def forward(self, x, mask, input_pos):
        b, s_x, _ = x.shape
        q = self.q_proj(x).view(b, s_x, self.num_heads, self.head_dim)               # (b, s, n_h, h_d)
        k = self.k_proj(x).view(b, s_x, self.num_kv_heads, self.head_dim)            # (b, s, n_kv, h_d)
        v = self.v_proj(x).view(b, s_x, self.num_kv_heads, self.head_dim)
        if self.bug != "rope-after-transpose":
            q, k = self.pos_embeddings(q, input_pos=input_pos), self.pos_embeddings(k, input_pos=input_pos)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)            # (b, n, s, h_d)
        if self.bug == "rope-after-transpose":
            q, k = self.pos_embeddings(q, input_pos=input_pos), self.pos_embeddings(k, input_pos=input_pos)
        k, v = self.kv_cache.update(k, v)                                            # (b, n_kv, S, h_d)
        q_per_kv = self.num_heads // self.num_kv_heads
        expand_shape = (b, self.num_kv_heads, q_per_kv, -1, self.head_dim)
        k = k.unsqueeze(2).expand(expand_shape).flatten(1, 2)                        # (b, n_h, S, h_d)
        v = v.unsqueeze(2).expand(expand_shape).flatten(1, 2)
        output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)             # (b, n_h, s, h_d)
        output = output.transpose(1, 2).contiguous().view(b, s_x, -1)
        return self.output_proj(output)


class Decoder(nn.Module):
    def __init__(self, dim, heads, batch_size, bug="", max_seq_len=16):
        super().__init__()
        self.attn = MultiHeadAttention(dim, heads, heads // 2, batch_size, max_seq_len, bug)
        self.register_buffer("causal_mask", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).tril(),
                             persistent=False)

    def forward(self, prompt):                                                        # (B, T, D)
        T = prompt.shape[1]
        return self.attn(prompt, self.causal_mask[None, None, :T], None)


BUGS = ("rope-after-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, B, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
