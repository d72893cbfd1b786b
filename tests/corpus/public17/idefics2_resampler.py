"""huggingface/transformers, src/transformers/models/idefics2/modeling_idefics2.py (v4.40,
``Idefics2PerceiverAttention``, ``Idefics2PerceiverLayer``, ``Idefics2PerceiverResampler``): learnt latents
``(n_latents, D)`` expanded to the batch; each layer ``hidden_states = torch.concat([context, latents], dim=-2)``,
queries from the latents alone, keys and values from the concatenation (grouped key/value heads, ``repeat_kv``),
``q.view(bsz, q_len, H, d).transpose(1, 2)``, ``matmul(q, k.transpose(2, 3)) / sqrt(d)``, the mask added,
``softmax(dtype=float32)``, ``transpose(1, 2).reshape(bsz, q_len, H*d)``, ``o_proj``; the resampler extends the
context's padding mask with ones for the latents, ``torch.cat([attention_mask, latent_attention_mask], dim=-1)``,
in the order the keys are joined, and expands it to ``(B, 1, n_latents, T + n_latents)`` (0 / dtype min).

Bugs (argument): ``latent-mask-first``: ``torch.cat([latent_attention_mask, attention_mask], dim=-1)`` (the
mask's parts joined in the other order than the keys': the padding hides context tokens that are real and a
latent, and shows the padded ones); ``out-not-transposed``: ``attn_output.reshape(bsz, q_len, H*d)`` straight
from ``(B, H, n, d)``."""

import math
import sys

import torch
from torch import nn


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Idefics2RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class Idefics2PerceiverAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim, self.bug = heads, kv_heads, dim // heads, bug
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, latents, context, attention_mask):                          # (B, n, D), (B, T, D)
        bsz, q_len, _ = latents.size()
        kv_seq_len = q_len + context.size()[1]
        hidden_states = torch.concat([context, latents], dim=-2)                      # (B, T+n, D)
        query_states = self.q_proj(latents)
        key_states, value_states = self.k_proj(hidden_states), self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, kv_seq_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, kv_seq_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        n_rep = self.num_heads // self.num_key_value_heads
        key_states, value_states = repeat_kv(key_states, n_rep), repeat_kv(value_states, n_rep)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask                                 # (B, H, n, T+n)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                       # (B, H, n, d)
        if self.bug == "out-not-transposed":
            attn_output = attn_output.reshape(bsz, q_len, self.num_heads * self.head_dim)
        else:
            attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len,
                                                                           self.num_heads * self.head_dim)
        return self.o_proj(attn_output)


class Idefics2PerceiverLayer(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.input_latents_norm, self.input_context_norm = Idefics2RMSNorm(dim), Idefics2RMSNorm(dim)
        self.self_attn = Idefics2PerceiverAttention(dim, heads, kv_heads, bug)
        self.post_attention_layernorm = Idefics2RMSNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim, bias=False), nn.SiLU(), nn.Linear(2 * dim, dim, bias=False))

    def forward(self, latents, context, attention_mask):
        residual = latents
        latents = self.input_latents_norm(latents)
        context = self.input_context_norm(context)
        latents = residual + self.self_attn(latents, context, attention_mask)
        return latents + self.mlp(self.post_attention_layernorm(latents))


class Idefics2PerceiverResampler(nn.Module):
    def __init__(self, dim, heads, kv_heads, n_latents, bug=""):
        super().__init__()
        self.n_latents, self.bug = n_latents, bug
        self.latents = nn.Parameter(torch.randn(n_latents, dim))
        self.layers = nn.ModuleList([Idefics2PerceiverLayer(dim, heads, kv_heads, bug) for _ in range(2)])
        self.norm = Idefics2RMSNorm(dim)

    def forward(self, context, attention_mask):                                    # (B, T, D), (B, T)
        latents = self.latents.unsqueeze(0).expand((context.shape[0], *self.latents.size()))
        latent_attention_mask = torch.ones((attention_mask.size(0), latents.size(1)), dtype=attention_mask.dtype)
        if self.bug == "latent-mask-first":
            attention_mask = torch.cat([latent_attention_mask, attention_mask], dim=-1)
        else:
            attention_mask = torch.cat([attention_mask, latent_attention_mask], dim=-1)   # (B, T+n)
        expanded = attention_mask[:, None, None, :].expand(-1, 1, self.n_latents, -1).to(context.dtype)
        attention_mask = (1.0 - expanded).masked_fill((1.0 - expanded).bool(), torch.finfo(context.dtype).min)
        compact_latents = latents
        for layer in self.layers:
            compact_latents = layer(compact_latents, context, attention_mask)
        return self.norm(compact_latents)


BUGS = ("latent-mask-first", "out-not-transposed")
TWINS = ()
DIMS = ("B=2 T=6 N=3 D=32 H=4 H_kv=2",)
EQUAL = {"B=2 T=6 N=3 D=32 H=4 H_kv=2": "B=4 T=4 N=4 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=6, N=3, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -2:] = 0                                                               # the last context padded
    return Idefics2PerceiverResampler(D, H, H_kv, N, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
