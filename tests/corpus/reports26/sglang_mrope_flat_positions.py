"""sgl-project/sglang issue #35345 ("[Bug] Qwen3.6/Qwen3.8 multimodal mRoPE positions are passed to a 1D fused QK
RMSNorm+RoPE CUDA kernel"; "There is no check for ``positions.ndim``, ``MRotaryEmbedding``, ``mrope_section``
... The wrapper documents ``positions: [T]``, and the Triton kernel loads only ``positions_ptr + token`` ... For a
contiguous ``(3, T)`` tensor, ``positions_ptr + token`` addresses only row 0"; fixed by pull request #31806,
"qwen3_5: fix multimodal mrope positions being collapsed by the CUDA fused rope kernel"): the fused path reads
the multimodal positions as one flat row, so every token is rotated by its temporal position alone, the height
and width rows never reached.

The idiom: sglang's flattened-token attention (``hidden_states`` ``[num_tokens, hidden]``, a fused ``qkv_proj``
split by ``split([q_size, kv_size, kv_size], dim=-1)``), per-head ``q_norm``/``k_norm`` (RMSNorm over
``head_dim``) before the rotary, ``MRotaryEmbedding.forward_native``: ``cos_sin_cache[positions]`` ``[3, T,
rotary_dim]``, ``chunk(2, dim=-1)``, each ``mrope_section`` taken from its row, neox ``rotate_half``; the fused
kernel's view of ``positions``: ``positions.reshape(-1)[:num_tokens]`` (the pointer ``positions_ptr + token``);
a causal ``RadixAttention`` over one request written out (``softmax(q k^T * scaling)``).

Bug (positions): ``flat-positions``: the fused 1-D path: ``positions.reshape(-1)[:num_tokens]`` indexes
``cos_sin_cache`` (``[T, rotary_dim]``) and the cos/sin are applied without sections."""

import sys

import torch
from torch import nn

BUGS = ("flat-positions",)
TWINS = ()
DIMS = ("T=6 D=32 H=4",)


def rotate_neox(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, max_position=64, base=10000.0, mrope_section=None):
        super().__init__()
        self.head_dim, self.mrope_section = head_dim, mrope_section
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        freqs = torch.outer(torch.arange(max_position).float(), inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat((freqs.cos(), freqs.sin()), dim=-1))  # (P, d)

    def forward_native(self, positions, query, key):
        num_tokens = query.shape[0]
        cos_sin = self.cos_sin_cache[positions]
        cos, sin = cos_sin.chunk(2, dim=-1)
        if positions.ndim == 2:                                                         # (3, T): sections
            cos = torch.cat([m[i] for i, m in enumerate(cos.split(self.mrope_section, dim=-1))], dim=-1)
            sin = torch.cat([m[i] for i, m in enumerate(sin.split(self.mrope_section, dim=-1))], dim=-1)
        cos, sin = torch.cat((cos, cos), dim=-1)[:, None, :], torch.cat((sin, sin), dim=-1)[:, None, :]
        query = query.view(num_tokens, -1, self.head_dim)
        key = key.view(num_tokens, -1, self.head_dim)
        return query * cos + rotate_neox(query) * sin, key * cos + rotate_neox(key) * sin

    def forward_cuda_fused(self, positions, query, key):
        """The 1-D fused kernel: it reads ``positions_ptr + token`` whatever the positions' rank."""
        return self.forward_native(positions.reshape(-1)[:query.shape[0]], query, key)


class Qwen3_5Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_size = self.kv_size = num_heads * self.head_dim
        self.scaling = self.head_dim ** -0.5
        self.qkv_proj = nn.Linear(hidden_size, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj = nn.Linear(self.q_size, hidden_size, bias=False)
        self.q_norm, self.k_norm = RMSNorm(self.head_dim), RMSNorm(self.head_dim)
        half = self.head_dim // 2
        self.rotary_emb = MRotaryEmbedding(self.head_dim, mrope_section=[half - 2 * (half // 4), half // 4,
                                                                          half // 4])

    def forward(self, positions, hidden_states):
        num_tokens = hidden_states.shape[0]
        qkv = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = self.q_norm(q.view(num_tokens, self.num_heads, self.head_dim))
        k = self.k_norm(k.view(num_tokens, self.num_heads, self.head_dim))
        if self.bug == "flat-positions":
            q, k = self.rotary_emb.forward_cuda_fused(positions, q, k)
        else:
            q, k = self.rotary_emb.forward_native(positions, q, k)
        v = v.view(num_tokens, self.num_heads, self.head_dim)
        scores = torch.einsum("qhd,khd->hqk", q, k) * self.scaling
        causal = torch.ones(num_tokens, num_tokens, dtype=torch.bool).tril()
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        out = torch.einsum("hqk,khd->qhd", probs, v).reshape(num_tokens, -1)
        return self.o_proj(out)


def build(bug="", T=6, D=32, H=4):
    torch.manual_seed(0)
    t = torch.arange(T)
    image = (t >= 1) & (t < 5)                        # a 2 x 2 image at tokens 1..4, text around it
    positions = torch.stack([torch.where(image, 1, t), torch.where(image, 1 + (t - 1) // 2, t),
                             torch.where(image, 1 + (t - 1) % 2, t)])             # (3, T)
    return Qwen3_5Attention(D, H, bug=bug).eval(), (positions, torch.randn(T, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
