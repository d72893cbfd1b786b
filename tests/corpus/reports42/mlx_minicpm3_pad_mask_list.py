"""ml-explore/mlx-lm issue #1906 ("[BUG] MiniCPM3 batch generation ignores the left-padding mask"; the fix in pull
request #1913, "Fix MiniCPM3 attention masking for padded batches"): ``minicpm3.py`` builds its mask as
``create_attention_mask(h, cache)`` with the whole *list* of per-layer caches; the padding-aware path needs a single
cache (``hasattr(cache, "make_mask")``), so the call fell through to ``"causal"`` on the prompt pass and to ``None``
on every decode step: ``BatchKVCache.left_padding`` was never read and the left pads of the shorter prompts were
ordinary keys ("The padded member keeps attending to its pads for the whole generation"). Positions were already
right (the cache's per-row offset starts at ``-left_padding``). The fix passes ``cache[0]``, whose ``make_mask``
gives ``create_causal_mask(N, offset, left_padding)``.

The idiom (mlx-lm's MiniCPM3 ``Attention``, multi-head latent attention, written in torch): ``q_a_proj`` ->
``q_a_layernorm`` -> ``q_b_proj``, ``reshape(B, L, H, q_head_dim).transpose(1, 2)``, split into ``q_nope`` /
``q_pe``; ``kv_a_proj_with_mqa`` split into ``compressed_kv`` / ``k_pe`` (one rotary head, ``reshape(B, L, 1,
r).transpose(1, 2)``), ``kv_b_proj(kv_a_layernorm(compressed_kv))`` split into ``k_nope`` / values; the rotary at the
cache's per-row offset, ``k_pe`` repeated over the heads, keys ``cat([k_nope, k_pe])``, the cache joined on the
tokens, scaled-dot-product attention with ``scale = q_head_dim ** -0.5`` and the mask (``"causal"``, a boolean
array, or ``None``), ``transpose(1, 2).reshape(B, L, -1)``, ``o_proj``; ``scale_emb`` on the embeddings and
``scale_depth / sqrt(layers)`` on each residual branch. A left-padded prompt pass, then one decode step.

Bug (argument): ``mask-from-cache-list``: the prompt pass masked ``"causal"`` only and the decode step unmasked."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("mask-from-cache-list",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def rope(x, offset, base=10000.0):
    r = x.shape[-1]
    positions = offset[:, None] + torch.arange(x.shape[2])                              # (B, L)
    inv_freq = 1.0 / (base ** (torch.arange(0, r, 2).float() / r))
    freqs = positions[..., None].float() * inv_freq                                     # (B, L, r/2)
    emb = torch.cat((freqs, freqs), dim=-1)[:, None]                                    # (B, 1, L, r)
    x1, x2 = x[..., : r // 2], x[..., r // 2:]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def create_causal_mask(N, offset, left_padding):
    rinds = torch.arange(offset + N)
    linds = torch.arange(offset, offset + N)
    mask = linds[:, None] >= rinds[None]                                                # (N, S)
    return mask & (rinds >= left_padding[:, None, None, None])                          # (B, 1, N, S)


class Attention(nn.Module):
    def __init__(self, hidden, heads, q_lora_rank=16, kv_lora_rank=16, nope=8, rope_dim=4, v_head_dim=8):
        super().__init__()
        self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim = heads, nope, rope_dim
        self.kv_lora_rank, self.v_head_dim, self.q_head_dim = kv_lora_rank, v_head_dim, nope + rope_dim
        self.softmax_scale = self.q_head_dim ** -0.5
        self.q_a_proj = nn.Linear(hidden, q_lora_rank, bias=False)
        self.q_a_layernorm = nn.RMSNorm(q_lora_rank)
        self.q_b_proj = nn.Linear(q_lora_rank, heads * self.q_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, kv_lora_rank + rope_dim, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(kv_lora_rank)
        self.kv_b_proj = nn.Linear(kv_lora_rank, heads * (nope + v_head_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_head_dim, hidden, bias=False)

    def forward(self, x, mask, cache):
        B, L, _ = x.shape
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.reshape(B, L, self.num_heads, self.q_head_dim).transpose(1, 2)            # (B, H, L, dq)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        compressed_kv, k_pe = torch.split(self.kv_a_proj_with_mqa(x), [self.kv_lora_rank, self.qk_rope_head_dim], -1)
        k_pe = k_pe.reshape(B, L, 1, self.qk_rope_head_dim).transpose(1, 2)             # (B, 1, L, r)
        kv = self.kv_b_proj(self.kv_a_layernorm(compressed_kv))
        kv = kv.reshape(B, L, self.num_heads, -1).transpose(1, 2)                       # (B, H, L, nope+dv)
        k_nope, values = torch.split(kv, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        q_pe, k_pe = rope(q_pe, cache["offset"]), rope(k_pe, cache["offset"])
        k_pe = k_pe.repeat(1, self.num_heads, 1, 1)                                     # (B, H, L, r)
        keys = torch.cat([k_nope, k_pe], dim=-1)                                        # (B, H, L, dq)
        if "keys" in cache:
            keys = torch.cat([cache["keys"], keys], dim=2)                              # (B, H, S, dq)
            values = torch.cat([cache["values"], values], dim=2)
        cache.update(keys=keys, values=values, offset=cache["offset"] + L)
        queries = torch.cat([q_nope, q_pe], dim=-1)                                     # (B, H, L, dq)
        output = F.scaled_dot_product_attention(queries, keys, values, scale=self.softmax_scale,
                                                attn_mask=None if isinstance(mask, str) else mask,
                                                is_causal=mask == "causal")             # (B, H, L, dv)
        return self.o_proj(output.transpose(1, 2).reshape(B, L, -1))                    # (B, L, D)


class MiniCPM3Model(nn.Module):
    def __init__(self, vocab, hidden, heads, bug="", scale_emb=12.0, scale_depth=1.4, num_hidden_layers=1):
        super().__init__()
        self.bug, self.scale_emb = bug, scale_emb
        self.residual_scale = scale_depth / num_hidden_layers ** 0.5
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(hidden), nn.RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads)
        self.gate_proj = nn.Linear(hidden, 2 * hidden, bias=False)
        self.up_proj = nn.Linear(hidden, 2 * hidden, bias=False)
        self.down_proj = nn.Linear(2 * hidden, hidden, bias=False)
        self.norm = nn.RMSNorm(hidden)

    def step(self, inputs, cache):
        h = self.embed_tokens(inputs) * self.scale_emb                                  # (B, L, D)
        N, idx = inputs.shape[1], cache.get("idx", 0)
        if self.bug == "mask-from-cache-list":
            mask = "causal" if N > 1 else None
        else:
            mask = create_causal_mask(N, idx, cache["left_padding"])
        cache["idx"] = idx + N
        h = h + self.self_attn(self.input_layernorm(h), mask, cache) * self.residual_scale
        r = self.post_attention_layernorm(h)
        h = h + self.down_proj(F.silu(self.gate_proj(r)) * self.up_proj(r)) * self.residual_scale
        return self.norm(h)

    def forward(self, prompts, left_padding, next_tokens):                              # (B, T), (B,), (B, 1)
        cache = {"left_padding": left_padding, "offset": -left_padding}
        self.step(prompts, cache)
        return self.step(next_tokens, cache)                                            # (B, 1, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    left_padding = torch.zeros(B, dtype=torch.long)
    left_padding[0] = 2
    prompts = torch.randint(1, 50, (B, T))
    prompts[0, :2] = 0                                                                  # left padding
    return MiniCPM3Model(50, D, H, bug).eval(), (prompts, left_padding, torch.randint(1, 50, (B, 1)))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
