"""huggingface/transformers, src/transformers/models/cohere/modeling_cohere.py (``CohereRotaryEmbedding``,
``rotate_half``, ``apply_rotary_pos_emb``, ``CohereLayerNorm``, ``CohereAttention``;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/cohere/modeling_cohere.py):
the rotary table is interleaved, ``emb = torch.repeat_interleave(freqs, 2, dim=-1)``, and its rotation pairs
neighbours, ``x1 = x[..., ::2]; x2 = x[..., 1::2]; torch.stack([-x2, x1], dim=-1).flatten(-2)`` ("this
function is different from e.g. Llama"); ``use_qk_norm``: a ``CohereLayerNorm(hidden_size=(num_heads,
head_dim))`` on ``q_proj(x).view(B, T, H, d)`` *before* ``transpose(1, 2)`` (its weight is per head);
grouped keys and values widened by ``repeat_kv``; eager attention with a causal mask.

Bugs (argument): ``halves-table``: Llama's table ``torch.cat((freqs, freqs), dim=-1)`` with Cohere's
interleaved rotation (the pairing mismatch of the Cohere port, transformers PR #29622's review);
``qk-norm-after-transpose``: the queries' per-head norm applied to ``(B, H, T, d)`` after the transpose, so its
``(H, d)`` weight lines up with the tokens (raises unless T = H); ``repeat-kv-tiled``: the groups
widened by ``repeat(1, n_rep, 1, 1)`` (head h reads group h % g, not h // n_rep)."""

import sys

import torch
from torch import nn

BUGS = ("halves-table", "qk-norm-after-transpose", "repeat-kv-tiled")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


class CohereLayerNorm(nn.Module):
    def __init__(self, hidden_size=None, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        mean = hidden_states.mean(-1, keepdim=True)
        variance = (hidden_states - mean).pow(2).mean(-1, keepdim=True)
        hidden_states = (hidden_states - mean) * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight.to(torch.float32) * hidden_states
        return hidden_states.to(input_dtype)


class CohereRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, bug=""):
        super().__init__()
        self.bug = bug
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)  # (B, T, d/2)
        if self.bug == "halves-table":
            emb = torch.cat((freqs, freqs), dim=-1)  # bug: Llama's halves table
        else:
            emb = torch.repeat_interleave(freqs, 2, dim=-1)  # (B, T, d)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def rotate_half(x):
    # Split and rotate. Note that this function is different from e.g. Llama.
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    rot_x = torch.stack([-x2, x1], dim=-1).flatten(-2)  # (B, H, T, d)
    return rot_x


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    dtype = q.dtype
    q = q.float()
    k = k.float()
    cos = cos.unsqueeze(unsqueeze_dim)  # (B, 1, T, d)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed.to(dtype=dtype), k_embed.to(dtype=dtype)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)  # (B, H, T, d)


class CohereAttention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, bug=""):
        super().__init__()
        self.bug = bug
        self.head_dim = hidden_size // num_heads
        self.num_heads, self.num_key_value_heads = num_heads, num_kv_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.q_norm = CohereLayerNorm(hidden_size=(num_heads, self.head_dim))
        self.k_norm = CohereLayerNorm(hidden_size=(num_kv_heads, self.head_dim))

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape)  # (B, T, H, d)
        key_states = self.k_proj(hidden_states).view(hidden_shape)  # (B, T, H_kv, d)
        value_states = self.v_proj(hidden_states).view(hidden_shape)  # (B, T, H_kv, d)
        if self.bug != "qk-norm-after-transpose":
            query_states = self.q_norm(query_states)
        key_states = self.k_norm(key_states)
        query_states = query_states.transpose(1, 2)  # (B, H, T, d)
        key_states = key_states.transpose(1, 2)  # (B, H_kv, T, d)
        value_states = value_states.transpose(1, 2)  # (B, H_kv, T, d)
        if self.bug == "qk-norm-after-transpose":
            query_states = self.q_norm(query_states)  # bug: weight (H, d) against (T, d)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if self.bug == "repeat-kv-tiled":
            key_states = key_states.repeat(1, self.num_key_value_groups, 1, 1)  # bug: tiled groups
            value_states = value_states.repeat(1, self.num_key_value_groups, 1, 1)
        else:
            key_states = repeat_kv(key_states, self.num_key_value_groups)
            value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling  # (B, H, T, T)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)  # (B, H, T, d)
        attn_output = attn_output.transpose(1, 2).contiguous()  # (B, T, H, d)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()  # (B, T, D)
        return self.o_proj(attn_output)


class CohereLayer(nn.Module):
    """Cohere's parallel block: attention and MLP read one norm, both added to the residual."""

    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, bug=""):
        super().__init__()
        self.input_layernorm = CohereLayerNorm(hidden_size)
        self.self_attn = CohereAttention(hidden_size, num_heads, num_kv_heads, bug)
        self.rotary_emb = CohereRotaryEmbedding(hidden_size // num_heads, bug=bug)
        self.mlp = nn.Sequential(nn.Linear(hidden_size, 2 * hidden_size), nn.SiLU(),
                                 nn.Linear(2 * hidden_size, hidden_size))

    def forward(self, hidden_states):
        batch, seq_len = hidden_states.shape[:2]
        position_ids = torch.arange(seq_len).unsqueeze(0).expand(batch, -1)  # (B, T)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        min_dtype = torch.finfo(hidden_states.dtype).min
        causal_mask = torch.full((seq_len, seq_len), min_dtype).triu(1)[None, None]  # (1, 1, T, T)
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states_attention = self.self_attn(hidden_states, position_embeddings, causal_mask)
        hidden_states_mlp = self.mlp(hidden_states)
        return residual + hidden_states_attention + hidden_states_mlp


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4 H_kv=2': hidden states (B, T, D), two key/value groups."""
    torch.manual_seed(0)
    return CohereLayer(D, H, 2, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
