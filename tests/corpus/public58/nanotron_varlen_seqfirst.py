"""huggingface/nanotron, src/nanotron/models/llama.py (``CausalSelfAttention.forward``, the training branch, and
``CoreAttention.forward``): sequence-first activations ``[seq_length, batch_size, hidden]``; one ``qkv_proj`` of
width ``(n_q_heads + 2 * n_kv_heads) * d_qk`` cut by ``torch.split(..., [n_q * d_qk, n_kv * d_qk, n_kv * d_qk],
dim=-1)`` (the ``is_gqa`` branch), each ``transpose(0, 1).contiguous().view(batch_size, q_length, n_heads, d_qk)``;
keys and values stacked ``cat([key.unsqueeze(0), value.unsqueeze(0)])`` and ``permute(1, 2, 0, 3, 4)`` to
``[batch, seq, 2, n_kv, d_qk]`` for flash-attn's rotary (halves, applied to the queries and to the key slot), split
back with ``torch.split(kv, 1, dim=2)``; everything flattened ``view(batch_size * q_length, n_heads, d_qk)`` for
``flash_attn_varlen_func`` with ``cu_seqlens`` made by ``cumsum(sequence_mask.sum(-1))``, ``causal=True``; the output
``view(batch_size, q_length, n_q * d_v).transpose(0, 1)`` and ``o_proj``. Here flash-attn's two functions are written
out in torch (its rotary on ``[b, s, (2,) h, d]``; the varlen attention a loop over ``cu_seqlens`` with its grouped
heads, query head h reading key/value head ``h // (n_q / n_kv)``). Full sequences: ``sequence_mask`` all ones.

Bugs: ``key-view-no-transpose``: the keys viewed ``(batch_size, q_length, n_kv, d_qk)`` straight from ``[seq,
batch, ...]`` (the ``transpose(0, 1)`` of the query line not copied to the key line: every key row is another
sequence's token); ``output-view-seq-first``: the output viewed ``(q_length, batch_size, n_q * d_v)`` directly
instead of ``view(batch_size, q_length, ...).transpose(0, 1)`` (the rows of ``[batch * seq]`` read in the other
order)."""

import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class FlashRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, q, kv):                                                         # (b, s, h, d), (b, s, 2, h, d)
        freqs = torch.outer(torch.arange(q.shape[1], dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]           # (1, s, 1, d)
        q = q * cos + rotate_half(q) * sin
        k = kv[:, :, 0] * cos + rotate_half(kv[:, :, 0]) * sin
        return q, torch.stack((k, kv[:, :, 1]), dim=2)                                # (b, s, 2, h, d)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=True):
    """The torch meaning of flash-attn's varlen kernel: ``q [total_q, h, d]``, ``k, v [total_k, h_kv, d]``."""
    out = torch.empty_like(q)
    n_rep = q.shape[1] // k.shape[1]
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(bounds_q) - 1):
        qi = q[bounds_q[i]:bounds_q[i + 1]].transpose(0, 1)                           # (h, s_i, d)
        ki = k[bounds_k[i]:bounds_k[i + 1]].repeat_interleave(n_rep, dim=1).transpose(0, 1)
        vi = v[bounds_k[i]:bounds_k[i + 1]].repeat_interleave(n_rep, dim=1).transpose(0, 1)
        scores = qi @ ki.transpose(-2, -1) * qi.shape[-1] ** -0.5                     # (h, s_i, s_i)
        if causal:
            future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        out[bounds_q[i]:bounds_q[i + 1]] = (scores.softmax(dim=-1) @ vi).transpose(0, 1)
    return out                                                                        # (total_q, h, d)


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden_size, n_q_heads, n_kv_heads, bug=""):
        super().__init__()
        self.n_local_q_heads, self.n_local_kv_heads, self.bug = n_q_heads, n_kv_heads, bug
        self.d_qk = self.d_v = hidden_size // n_q_heads
        self.qkv_proj = nn.Linear(hidden_size, (n_q_heads + 2 * n_kv_heads) * self.d_qk, bias=False)
        self.o_proj = nn.Linear(n_q_heads * self.d_v, hidden_size, bias=False)
        self.flash_rotary_embedding = FlashRotaryEmbedding(self.d_qk)

    def forward(self, hidden_states, sequence_mask):                                 # (seq, batch, hidden)
        qkv_states = self.qkv_proj(hidden_states)
        q_length, batch_size, _ = qkv_states.shape
        nq, nkv, d = self.n_local_q_heads, self.n_local_kv_heads, self.d_qk
        query_states, key_states, value_states = torch.split(qkv_states, [nq * d, nkv * d, nkv * d], dim=-1)
        query_states = query_states.transpose(0, 1).contiguous().view(batch_size, q_length, nq, d)  # (b, s, h, d)
        if self.bug == "key-view-no-transpose":
            key_states = key_states.contiguous().view(batch_size, q_length, nkv, d)
        else:
            key_states = key_states.transpose(0, 1).contiguous().view(batch_size, q_length, nkv, d)  # (b, s, h_kv, d)
        value_states = value_states.transpose(0, 1).contiguous().view(batch_size, q_length, nkv, d)
        key_value_states = torch.cat([key_states.unsqueeze(0), value_states.unsqueeze(0)], dim=0)  # (2, b, s, h_kv, d)
        key_value_states = key_value_states.permute(1, 2, 0, 3, 4).contiguous()      # (b, s, 2, h_kv, d)
        query_states, key_value_states = self.flash_rotary_embedding(query_states, kv=key_value_states)
        key_states, value_states = torch.split(key_value_states, 1, dim=2)            # (b, s, 1, h_kv, d)
        query_states = query_states.view(batch_size * q_length, nq, d)                # (b * s, h, d)
        key_states = key_states.view(batch_size * q_length, nkv, d)                   # (b * s, h_kv, d)
        value_states = value_states.view(batch_size * q_length, nkv, self.d_v)
        cu_seqlens = torch.zeros(sequence_mask.shape[0] + 1, dtype=torch.int32)
        cu_seqlens[1:] = torch.cumsum(sequence_mask.sum(-1, dtype=torch.int32), dim=0, dtype=torch.int32)
        attention_output = flash_attn_varlen_func(query_states, key_states, value_states, cu_seqlens, cu_seqlens,
                                                  causal=sequence_mask.shape[1] != 1)
        if self.bug == "output-view-seq-first":
            attention_output = attention_output.contiguous().view(q_length, batch_size, nq * self.d_v)
        else:
            attention_output = attention_output.contiguous().view(batch_size, q_length, nq * self.d_v).transpose(0, 1)
        return self.o_proj(attention_output)                                         # (seq, batch, hidden)


class LlamaSketch(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(hidden_size)
        self.attn = CausalSelfAttention(hidden_size, num_heads, num_heads // 2, bug)

    def forward(self, inputs_embeds, input_mask):                                     # (batch, seq, hidden)
        hidden_states = inputs_embeds.transpose(0, 1)                                 # (seq, batch, hidden)
        hidden_states = hidden_states + self.attn(self.input_layernorm(hidden_states), input_mask)
        return hidden_states.transpose(0, 1)


BUGS = ("key-view-no-transpose", "output-view-seq-first")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4 H_kv=2",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 H_kv=2"}


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    return LlamaSketch(D, H, bug).eval(), (torch.randn(B, T, D), torch.ones(B, T, dtype=torch.bool))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
