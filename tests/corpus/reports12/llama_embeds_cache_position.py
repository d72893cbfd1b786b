"""huggingface/transformers PR #37403 ("Fix: compute cache_position correctly when inputs_embeds are used
during generation with past_key_values"): with ``inputs_embeds`` in place of ``input_ids`` at an incremental
step, ``cache_position`` was initialised from ``inputs_embeds`` alone (``torch.arange(inputs_embeds.shape[1])``)
instead of ``torch.arange(past_seen_tokens, past_seen_tokens + seq_len)``, so the new token's rotary angle (and
its row of the causal mask) said "position 0" while its key was appended after the cached ones: the report's
"incorrect rotary embedding alignment".

The idiom (transformers' Llama): ``LlamaRotaryEmbedding`` (``inv_freq @ position_ids``, ``cat((freqs, freqs))``,
``cos``/``sin`` unsqueezed over the heads), ``apply_rotary_pos_emb`` with ``rotate_half``, ``q_proj``/
``k_proj``/``v_proj`` viewed ``(B, T, H, d).transpose(1, 2)``, the cache joined on the token axis, a causal
mask built from ``cache_position`` against the key positions, ``softmax`` in float32, ``o_proj``. The model runs
a prefill of T embedded tokens, then one decoding step from ``inputs_embeds``.

Bug (argument): ``cache-position-from-embeds``: the step's ``cache_position`` is ``arange(seq_len)``."""

import sys

import torch
from torch import nn

BUGS = ("cache-position-from-embeds",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim))

    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)            # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()                                                      # (B, T, d)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_heads, self.head_dim = heads, hidden // heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))

    def forward(self, hidden_states, cos, sin, mask, past=None):
        bsz, q_len, _ = hidden_states.shape
        shape = (bsz, q_len, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)                        # (B, H, T, d)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin              # [rope]
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)          # (B, H, S, d)
        w = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5 + mask             # (B, H, T, S)
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out), (k, v)


class LlamaModel(nn.Module):
    def __init__(self, hidden, heads, bug=""):
        super().__init__()
        self.bug = bug
        self.rotary_emb = LlamaRotaryEmbedding(hidden // heads)
        self.self_attn = LlamaAttention(hidden, heads)

    def step(self, inputs_embeds, past=None):
        past_seen_tokens = 0 if past is None else past[0].shape[2]
        if self.bug == "cache-position-from-embeds":
            cache_position = torch.arange(inputs_embeds.shape[1])                         # [positions]
        else:
            cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1])   # [positions]
        position_ids = cache_position.unsqueeze(0).expand(inputs_embeds.shape[0], -1)
        cos, sin = self.rotary_emb(inputs_embeds, position_ids)
        target_length = past_seen_tokens + inputs_embeds.shape[1]
        causal = torch.arange(target_length)[None, :] > cache_position[:, None]            # (T, S)
        mask = torch.zeros(causal.shape).masked_fill(causal, torch.finfo(torch.float32).min)[None, None]
        return self.self_attn(inputs_embeds, cos, sin, mask, past)

    def forward(self, prompt_embeds, next_embeds):
        _, past = self.step(prompt_embeds)
        out, _ = self.step(next_embeds, past)
        return out


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return LlamaModel(D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, 1, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
