"""huggingface/transformers, src/transformers/models/qwen3_next/modeling_qwen3_next.py (``Qwen3NextAttention``
with ``eager_attention_forward``, ``repeat_kv``, ``apply_rotary_pos_emb``, ``Qwen3NextRMSNorm``), v4.57: the
gated full-attention layers of Qwen3-Next (and Qwen3.5): ``q_proj`` gives ``num_heads * head_dim * 2``, viewed
``(*input_shape, -1, head_dim * 2)`` and cut by ``torch.chunk(..., 2, dim=-1)`` into the query and a per-head
output gate (each head's 2·d_k outputs are its query then its gate: an interleaved, per-head split);
``gate.reshape(*input_shape, -1)``; per-head ``q_norm``/``k_norm`` (RMSNorm over head_dim) before
``transpose(1, 2)``; rotary (``rotate_half``, partial rotary left out); GQA by ``repeat_kv``; eager scores,
causal mask, softmax in float32, ``attn_output.transpose(1, 2)``, ``reshape(*input_shape, -1)``, then
``attn_output * torch.sigmoid(gate)`` and ``o_proj``.

Bugs: ``gate-flat-halves``: the query and the gate cut as two flat halves of ``q_proj``'s output,
``q_proj(x).chunk(2, dim=-1)`` before any per-head view (the layout of a port that reads the gate as one block:
with trained weights every head's query takes half of another head's gate rows; which fused layout the weights
were trained for is not in the code); ``output-no-transpose``: the attention output folded by
``attn_output.reshape(*input_shape, -1)`` straight from ``(B, H, T, d_k)`` (heads and positions mixed before the
gate and ``o_proj``)."""

import sys

import torch
from torch import nn


class Qwen3NextRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                                     # (B, 1, T, d_k)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)  # (B, H, T, d_k)


class Qwen3NextRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim)))

    def forward(self, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]       # (B, T, d_k/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                        # (B, T, d_k)
        return emb.cos(), emb.sin()


class Qwen3NextAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.head_dim = hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim * 2, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.q_norm = Qwen3NextRMSNorm(self.head_dim)
        self.k_norm = Qwen3NextRMSNorm(self.head_dim)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        if self.bug == "gate-flat-halves":
            query_states, gate = self.q_proj(hidden_states).chunk(2, dim=-1)          # (B, T, H*d_k)
        else:
            query_states, gate = torch.chunk(
                self.q_proj(hidden_states).view(*input_shape, -1, self.head_dim * 2), 2, dim=-1)  # (B, T, H, d_k)
        gate = gate.reshape(*input_shape, -1)                                          # (B, T, H*d_k)
        query_states = self.q_norm(query_states.view(hidden_shape)).transpose(1, 2)    # (B, H, T, d_k)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)  # (B, H_kv, T, d_k)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, H_kv, T, d_k)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)                 # (B, H, T, d_k)
        value_states = repeat_kv(value_states, self.num_key_value_groups)             # (B, H, T, d_k)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling  # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                        # (B, H, T, d_k)
        if self.bug == "output-no-transpose":
            attn_output = attn_output.reshape(*input_shape, -1)                        # (B, T, H*d_k)
        else:
            attn_output = attn_output.transpose(1, 2).contiguous()                     # (B, T, H, d_k)
            attn_output = attn_output.reshape(*input_shape, -1)                        # (B, T, H*d_k)
        attn_output = attn_output * torch.sigmoid(gate)
        return self.o_proj(attn_output)


class Qwen3NextLayer(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.input_layernorm = Qwen3NextRMSNorm(hidden_size)
        self.self_attn = Qwen3NextAttention(hidden_size, num_heads, num_kv_heads, bug)
        self.rotary_emb = Qwen3NextRotaryEmbedding(hidden_size // num_heads)

    def forward(self, hidden_states):
        B, T, _ = hidden_states.shape
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)                      # (B, T)
        causal = torch.full((T, T), float("-inf")).triu(1)[None, None]                 # (1, 1, T, T)
        position_embeddings = self.rotary_emb(position_ids)
        h = self.self_attn(self.input_layernorm(hidden_states), position_embeddings, causal)
        return hidden_states + h


BUGS = ("gate-flat-halves", "output-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    model = Qwen3NextLayer(D, H, H_kv, bug).eval()
    return model, (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
