"""google/gemma_pytorch, gemma/model.py (``GemmaAttention.forward``, ``apply_rotary_emb``,
``precompute_freqs_cis``) and the masks of ``GemmaForCausalLM.generate``
(https://github.com/google/gemma_pytorch): a fused ``qkv_proj`` cut ``split([q_size, kv_size, kv_size])``
with a head width that is not D/H (``head_dim`` from the config); rotary through ``view_as_complex`` of
``stack(chunk(x.transpose(1, 2), 2, dim=-1), dim=-1)`` (halves, not pairs) and back through
``cat(chunk(x_out, 2, dim=-1), dim=-2)``; a cache written ``k_cache.index_copy_(1, kv_write_indices, xk)``
and read whole; grouped heads by ``repeat_interleave(key, num_queries_per_kv, dim=2)``; logits soft-capped
(``scores / cap``, ``tanh``, ``* cap``) before the mask; the mask ``triu(full(min), 1)`` of the cache's
length picked by ``index_select(2, input_positions)``.

Bugs (argument): ``repeat-tiled``: ``key.repeat(1, 1, num_queries_per_kv, 1)`` for ``repeat_interleave``:
query head i reads key/value head ``i % n_kv`` (the head order of https://github.com/apple/axlearn/pull/842);
``mask-rows-from-zero``: the mask's rows taken ``mask_tensor[:, :, :input_len]`` (from position 0) instead
of ``index_select(2, input_positions)``: in the second step the new queries get the first rows of the
triangle and cannot see the cache."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("repeat-tiled", "mask-rows-from-zero")
DIMS = ("B=3 T=6 D=32 H=4 H_kv=2",)
MAX_LEN = 16


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))  # (d_k/2,)
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()  # (L, d_k/2)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64 (L, d_k/2)


def apply_rotary_emb(x, freqs_cis):
    x_ = torch.view_as_complex(torch.stack(torch.chunk(x.transpose(1, 2).float(), 2, dim=-1), dim=-1))  # (B, H, T, d/2)
    x_out = torch.view_as_real(x_ * freqs_cis).type_as(x)  # (B, H, T, d/2, 2)
    x_out = torch.cat(torch.chunk(x_out, 2, dim=-1), dim=-2)  # (B, H, T, d, 1)
    return x_out.reshape(x_out.shape[0], x_out.shape[1], x_out.shape[2], -1).transpose(1, 2)  # (B, T, H, d)


class GemmaAttention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=16, softcap=50.0, bug=""):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim, self.bug = num_heads, num_kv_heads, head_dim, bug
        self.num_queries_per_kv = num_heads // num_kv_heads
        self.q_size, self.kv_size = num_heads * head_dim, num_kv_heads * head_dim
        self.scaling = head_dim**-0.5
        self.attn_logit_softcapping = softcap
        self.qkv_proj = nn.Linear(hidden_size, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj = nn.Linear(self.q_size, hidden_size, bias=False)

    def forward(self, hidden_states, freqs_cis, kv_write_indices, kv_cache, mask):
        batch_size, input_len, _ = hidden_states.shape
        qkv = self.qkv_proj(hidden_states)
        xq, xk, xv = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        xq = xq.view(batch_size, -1, self.num_heads, self.head_dim)  # (B, T, H, d_k)
        xk = xk.view(batch_size, -1, self.num_kv_heads, self.head_dim)  # (B, T, H_kv, d_k)
        xv = xv.view(batch_size, -1, self.num_kv_heads, self.head_dim)  # (B, T, H_kv, d_k)
        xq = apply_rotary_emb(xq, freqs_cis=freqs_cis)
        xk = apply_rotary_emb(xk, freqs_cis=freqs_cis)
        k_cache, v_cache = kv_cache
        k_cache.index_copy_(1, kv_write_indices, xk)
        v_cache.index_copy_(1, kv_write_indices, xv)
        key, value = k_cache, v_cache  # (B, L, H_kv, d_k)
        if self.bug == "repeat-tiled":
            key = key.repeat(1, 1, self.num_queries_per_kv, 1)  # bug: kv heads tiled
            value = value.repeat(1, 1, self.num_queries_per_kv, 1)
        else:
            key = torch.repeat_interleave(key, self.num_queries_per_kv, dim=2)  # (B, L, H, d_k)
            value = torch.repeat_interleave(value, self.num_queries_per_kv, dim=2)  # (B, L, H, d_k)
        q = xq.transpose(1, 2)  # (B, H, T, d_k)
        k = key.transpose(1, 2)  # (B, H, L, d_k)
        v = value.transpose(1, 2)  # (B, H, L, d_k)
        q.mul_(self.scaling)
        scores = torch.matmul(q, k.transpose(2, 3))  # (B, H, T, L)
        scores = scores / self.attn_logit_softcapping
        scores = torch.tanh(scores)
        scores = scores * self.attn_logit_softcapping
        scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(q)
        output = torch.matmul(scores, v)  # (B, H, T, d_k)
        output = output.transpose(1, 2).contiguous().view(batch_size, input_len, -1)  # (B, T, H·d_k)
        return self.o_proj(output)


class Gemma(nn.Module):
    """``generate``'s two steps: the prompt, then the next tokens, over one cache of ``MAX_LEN`` positions."""

    def __init__(self, hidden_size=32, num_heads=4, bug="", head_dim=16):
        super().__init__()
        self.bug = bug
        self.attn = GemmaAttention(hidden_size, num_heads, num_heads // 2, head_dim=head_dim, bug=bug)
        self.register_buffer("freqs_cis", precompute_freqs_cis(head_dim, MAX_LEN * 2), persistent=False)

    def step(self, h, positions, kv_cache, mask_tensor):
        freqs_cis = self.freqs_cis.index_select(0, positions)  # (T, d_k/2)
        if self.bug == "mask-rows-from-zero":
            mask = mask_tensor[:, :, : positions.numel()]  # bug: rows from position 0
        else:
            mask = mask_tensor.index_select(2, positions)  # (1, 1, T, L)
        return self.attn(h, freqs_cis, positions, kv_cache, mask)

    def forward(self, h):
        batch_size, seq_len, _ = h.shape
        kv = self.attn
        kv_cache = (torch.zeros(batch_size, MAX_LEN, kv.num_kv_heads, kv.head_dim),
                    torch.zeros(batch_size, MAX_LEN, kv.num_kv_heads, kv.head_dim))
        mask_tensor = torch.full((1, 1, MAX_LEN, MAX_LEN), -2.3819763e38).to(torch.float)
        mask_tensor = torch.triu(mask_tensor, diagonal=1)  # (1, 1, L, L)
        first = seq_len // 2
        out1 = self.step(h[:, :first], torch.arange(0, first), kv_cache, mask_tensor)  # (B, T1, D)
        out2 = self.step(h[:, first:], torch.arange(first, seq_len), kv_cache, mask_tensor)  # (B, T2, D)
        return torch.cat([out1, out2], dim=1)  # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4, head_dim=16):
    """--dims 'B=2 T=6 D=32 H=4' (H_kv = H/2, head_dim 16 ≠ D/H, as Gemma 7B: 256 ≠ 3072/16)."""
    torch.manual_seed(0)
    return Gemma(D, H, bug, head_dim).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
