"""huggingface/transformers, src/transformers/models/gemma3/modeling_gemma3.py (v4.50, ``Gemma3Attention``,
``Gemma3RMSNorm``, ``Gemma3TextModel``): ``q_proj``/``k_proj``/``v_proj`` with grouped key/value heads, each
viewed ``(B, T, -1, head_dim)`` and ``transpose(1, 2)``; ``q_norm``/``k_norm``, an RMSNorm over ``head_dim`` with
the ``(1 + weight)`` scale; rotary (``rotate_half``) with a local base (10000) on sliding layers and a global
base (1e6) on global ones (every sixth layer global; here layers 0 and 1 sliding, layer 2 global: the pattern
cut short); ``repeat_kv``; ``scaling = query_pre_attn_scalar ** -0.5``; the causal mask, and on sliding layers
the window ``kv_idx > q_idx - sliding_window`` on top; ``softmax(..., dtype=float32)``, ``o_proj``.

Bugs (argument): ``norm-over-heads``: the per-head RMSNorm's mean taken over ``dim=1`` (the axis the norm
would reduce in the ``(B, T, H, d)`` layout written before the transpose, the slip of a hand-written
``variance = x.pow(2).mean(1, keepdim=True)``: q and k normalised across the heads, not within each);
``window-without-causal``: the sliding mask made from the window alone (``kv_idx > q_idx - sliding_window``,
the causal half ``& (kv_idx <= q_idx)`` dropped, as ports that build the local mask on its own do: each query
sees the next tokens)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Gemma3RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, reduce_dim=-1):
        super().__init__()
        self.eps, self.reduce_dim = eps, reduce_dim
        self.weight = nn.Parameter(torch.randn(dim) * 0.1)

    def forward(self, x):
        variance = x.float().pow(2).mean(self.reduce_dim, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * (1.0 + self.weight.float())


class Gemma3Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, head_dim, sliding, bug=""):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.sliding = heads, kv_heads, head_dim, sliding
        self.scaling = head_dim**-0.5
        self.q_proj = nn.Linear(dim, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, dim, bias=False)
        reduce_dim = 1 if bug == "norm-over-heads" else -1
        self.q_norm, self.k_norm = Gemma3RMSNorm(head_dim, reduce_dim=reduce_dim), Gemma3RMSNorm(head_dim,
                                                                                               reduce_dim=reduce_dim)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        B, T, _ = hidden_states.shape
        hidden_shape = (B, T, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H, T, d)
        k = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)          # (B, H_kv, T, d)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                                # (B, 1, T, d)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.heads // self.kv_heads), repeat_kv(v, self.heads // self.kv_heads)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling            # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()    # (B, T, H, d)
        return self.o_proj(attn_output.reshape(B, T, -1))


class Gemma3RotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):                                            # (B, T)
        inv_freq = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)      # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Gemma3TextModel(nn.Module):
    def __init__(self, dim, heads, bug="", layers=3, sliding_window=3):
        super().__init__()
        head_dim, self.bug, self.sliding_window = dim // heads, bug, sliding_window
        self.embed_scale = dim**0.5
        self.layers = nn.ModuleList(Gemma3Attention(dim, heads, heads // 2, head_dim, (i + 1) % 3 != 0, bug)
                                    for i in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.rotary_emb = Gemma3RotaryEmbedding(head_dim, 1_000_000.0)
        self.rotary_emb_local = Gemma3RotaryEmbedding(head_dim, 10_000.0)

    def masks(self, T, dtype):
        q_idx, kv_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]
        causal = kv_idx <= q_idx                                                     # (T, T)
        window = kv_idx > q_idx - self.sliding_window
        local = window if self.bug == "window-without-causal" else causal & window
        hide = torch.finfo(dtype).min
        as_bias = lambda keep: torch.zeros(T, T).masked_fill(~keep, hide)[None, None]  # noqa: E731
        return as_bias(causal), as_bias(local)

    def forward(self, inputs_embeds):                                               # (B, T, D)
        B, T, _ = inputs_embeds.shape
        hidden_states = inputs_embeds * self.embed_scale
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        global_pe = self.rotary_emb(hidden_states, position_ids)
        local_pe = self.rotary_emb_local(hidden_states, position_ids)
        global_mask, local_mask = self.masks(T, hidden_states.dtype)
        for layer in self.layers:
            pe, mask = (local_pe, local_mask) if layer.sliding else (global_pe, global_mask)
            hidden_states = hidden_states + layer(self.norm(hidden_states), pe, mask)
        return hidden_states


BUGS = ("norm-over-heads", "window-without-causal")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return Gemma3TextModel(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
