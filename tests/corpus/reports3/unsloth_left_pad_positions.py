"""unslothai/unsloth issue #3699, fixed by PR #3803 ("fix: compute position_ids correctly for batched
left-padded generation"; PRs #3795 and #4078 propose the same fix): ``_fast_prepare_inputs_for_generation``
set ``position_ids = cache_position``, one ``arange`` shared by the whole batch; with left padding each row's
first real token must sit at position 0, so the shorter prompts were rotated as if their padding were text
and generated garbage, while the longest prompt (no padding) was right. The fix derives each row's positions
from its attention mask, ``cumsum(-1) - 1`` with the padding filled, and keeps the last column at a step.
Here the prefill's positions come from the mask (as transformers' ``generate`` computes them) and the bug is
in the steps': rotary positions are relative, so a shift common to a row's prefill and its steps would cancel;
the padded row's step is rotated two positions past its last prompt token instead of one.

Llama's idiom (transformers' eager path): ``LlamaRotaryEmbedding`` (``inv_freq[None, :, None] @
position_ids[:, None, :]``, ``cat((freqs, freqs))``, ``cos``/``sin`` ``(B, T, d)`` unsqueezed on the heads),
``rotate_half``, the cache joined on the token axis, a 4-D boolean mask from the causal triangle and the 2-D
padding mask, ``masked_fill`` with the dtype's minimum, ``softmax(dim=-1)``. The model runs a prefill of T
tokens (the first row left-padded by two), then one decoding step.

Bug (argument): ``positions-from-cache``: at the decoding step, ``position_ids = cache_position.unsqueeze(0)``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("positions-from-cache",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq_expanded @ position_ids[:, None, :].float()).transpose(1, 2)   # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                          # (B, T, d)
        return emb.cos(), emb.sin()


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden_size, hidden_size, bias=False)
                                                              for _ in range(4))
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, attention_mask, position_ids, past=None):
        bsz, q_len, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                          # (B, 1, T, d)
        q = q * cos + rotate_half(q) * sin                                     # [rope]
        k = k * cos + rotate_half(k) * sin
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)   # (B, H, P+T, d)
        kv_len = k.shape[2]
        causal = torch.ones(q_len, kv_len, dtype=torch.bool).tril(kv_len - q_len)  # (T, P+T)
        mask = causal[None, None, :, :] & attention_mask[:, None, None, :].bool()   # (B, 1, T, P+T)
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        out = F.softmax(scores, dim=-1) @ v                                    # (B, H, T, d)
        out = out.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out), (k, v)


class Generator(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.attn = LlamaAttention(hidden_size, num_heads)
        self.bug = bug

    def position_ids(self, attention_mask, cache_position):
        if self.bug == "positions-from-cache" and cache_position[0] > 0:
            return cache_position.unsqueeze(0)                                 # (1, T)
        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids = position_ids.masked_fill(attention_mask == 0, 1)
        return position_ids[:, -cache_position.shape[0]:]                      # (B, T)

    def forward(self, prompt, attention_mask, step):
        T = prompt.shape[1]
        _, past = self.attn(prompt, attention_mask, self.position_ids(attention_mask, torch.arange(T)))
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones(attention_mask.shape[0], 1)], dim=-1)
        position_ids = self.position_ids(attention_mask, torch.arange(T, T + 1))
        out, _ = self.attn(step, attention_mask, position_ids, past)
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, :2] = 0                                                  # the first prompt: left padding
    return Generator(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask, torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
