"""Beomi/InfiniTransformer, infini_gemma/modeling_infini_gemma.py (``GemmaInfiniAttention.forward``,
``_retrieve_from_memory``, ``_update_memory``; the rotary and ``rotate_half`` it takes from transformers' Gemma):
Infini-attention (arXiv 2404.07143), a compressive linear-attention memory beside causal softmax attention over one
segment. q, k, v ``view(bsz, q_len, heads, head_dim).transpose(1, 2)``; the memory is read before the rotary
("Infini Attention memory does not use PE"): ``sigma(q) = elu(q) + 1``, ``matmul(sigma(q), memory)`` divided by
``matmul(sigma(q), norm_term.transpose(-2, -1))``; then written: ``memory + matmul(sigma(k).transpose(-2, -1),
value_states)`` ``(b, h, d_k, d_v)`` and ``norm_term + sigma(k).sum(dim=2, keepdim=True)`` ``(b, h, 1, d_k)``; the
rotary on q and k, ``scaled_dot_product_attention`` with the causal mask; a learned gate per head ``gate (1,
num_heads, 1, 1)``: ``sigmoid(gate) * memory_output + (1 - sigmoid(gate)) * attn_output``;
``transpose(1, 2).contiguous().view(bsz, q_len, hidden_size)``, ``o_proj``.

Bugs: ``memory-update-transposed``: ``matmul(value_states.transpose(-2, -1), sigma(k))`` (the memory written
``(d_v, d_k)``: with ``d_k = d_v`` it runs, and the next segment's ``sigma(q) @ memory`` reads it transposed);
``norm-sum-over-heads``: ``sigma(k).sum(dim=1, keepdim=True)`` (the normaliser summed over the heads of each token
instead of over the segment's tokens: ``(b, 1, t, d_k)`` broadcast into ``(b, h, t, d_k)``, one row per token);
``rope-before-memory``: the rotary applied to q and k before the memory is read and written (the memory then holds
position-rotated keys, which the paper and the file's comment exclude: a query at one position retrieves keys
rotated for another)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class GemmaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)   # (b, d / 2, 1)
        position_ids_expanded = position_ids[:, None, :].float()                               # (b, 1, t)
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)                    # (b, t, d / 2)
        emb = torch.cat((freqs, freqs), dim=-1)                                                # (b, t, d)
        return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)                      # (b, 1, t, d)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class GemmaInfiniAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.hidden_size, self.num_heads, self.bug = hidden_size, num_heads, bug
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.rotary_emb = GemmaRotaryEmbedding(self.head_dim)
        self.gate = nn.Parameter(torch.randn(1, num_heads, 1, 1))   # (the file's -100 start would hide the memory)

    def forward(self, hidden_states, position_ids, memory, norm_term):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)   # (b, h, t, d)
        key_states = key_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)       # (b, h, t, d)
        value_states = value_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)   # (b, h, t, d)
        cos, sin = self.rotary_emb(value_states, position_ids)
        if self.bug == "rope-before-memory":
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        memory_output = self._retrieve_from_memory(query_states, memory, norm_term)
        updated_memory, updated_norm_term = self._update_memory(key_states, value_states, memory, norm_term)
        if self.bug != "rope-before-memory":
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        causal_mask = torch.triu(torch.full((q_len, q_len), torch.finfo(hidden_states.dtype).min), diagonal=1)
        causal_mask = causal_mask[None, None].expand(bsz, 1, -1, -1)                              # (b, 1, t, t)
        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, attn_mask=causal_mask)
        combined_output = F.sigmoid(self.gate) * memory_output + (1 - F.sigmoid(self.gate)) * attn_output
        combined_output = combined_output.transpose(1, 2).contiguous()                            # (b, t, h, d)
        combined_output = combined_output.view(bsz, q_len, self.hidden_size)                      # (b, t, h·d)
        return self.o_proj(combined_output), updated_memory, updated_norm_term

    def _retrieve_from_memory(self, query_states, memory, norm_term):
        query_states = F.elu(query_states) + 1
        memory_output = torch.matmul(query_states, memory)                                        # (b, h, t, d)
        norm_term_broadcastable = torch.matmul(query_states, norm_term.transpose(-2, -1))         # (b, h, t, 1)
        return memory_output / norm_term_broadcastable

    def _update_memory(self, key_states, value_states, memory, norm_term):
        key_states = F.elu(key_states) + 1
        if self.bug == "memory-update-transposed":
            memory = memory + torch.matmul(value_states.transpose(-2, -1), key_states)
        else:
            memory = memory + torch.matmul(key_states.transpose(-2, -1), value_states)           # (b, h, d, d)
        norm_term = norm_term + key_states.sum(dim=1 if self.bug == "norm-sum-over-heads" else 2, keepdim=True)
        return memory, norm_term


BUGS = ("memory-update-transposed", "norm-sum-over-heads", "rope-before-memory")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=5, D=32, H=4):  # noqa: N803
    """The second segment of a sequence: positions ``T .. 2T - 1`` and the memory the first segment left (a sum of
    ``sigma(k)^T v`` over its tokens, so positive; the norm term ``sigma(k)`` summed, positive too)."""
    torch.manual_seed(0)
    model = GemmaInfiniAttention(D, H, bug=bug).eval()
    d = D // H
    position_ids = torch.arange(T, 2 * T)[None].expand(B, -1)
    memory = torch.rand(B, H, d, d) * T
    norm_term = torch.rand(B, H, 1, d) * T + 1.0
    return model, (torch.randn(B, T, D), position_ids, memory, norm_term)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
