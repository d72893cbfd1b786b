"""huggingface/transformers, src/transformers/models/nemotron/modeling_nemotron.py (v4.46, ``NemotronLayerNorm1P``,
``NemotronRotaryEmbedding``, ``apply_rotary_pos_emb``, ``NemotronAttention``, ``NemotronMLP``): the partial rotary
(``partial_rotary_factor = 0.5``: the rotary table is built for ``rot_dim = head_dim // 2`` and only the first
``rot_dim`` features of each head are rotated, ``q[..., :rot_dim]``, the rest passed through and ``cat`` back), the
LayerNorm whose weight is stored as ``weight - 1`` (``layer_norm(x, (D,), weight + 1, bias)``), grouped-query
attention with ``repeat_kv`` (``[:, :, None].expand(B, H_kv, n_rep, T, d).reshape(B, H, T, d)``), a causal mask, the
squared-ReLU MLP.

Bugs: ``rotate-half-over-whole-head``: ``rotate_half`` taken of the whole head and then cut, ``rotate_half(q)[...,
:rot_dim]`` (feature i paired with i + d/2 where i + rot/2 is meant: the natural slip of partial-rotary ports that
rotate before they split); ``softmax-before-mask``: the causal mask added
after the softmax (the natural slip of reordering the two lines: future tokens keep their probability plus a
``finfo.min`` bias)."""

import sys

import torch
from torch import nn


class NemotronLayerNorm1P(nn.LayerNorm):
    def forward(self, x):
        return nn.functional.layer_norm(x, self.normalized_shape, self.weight + 1, self.bias, self.eps)


class NemotronRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1, bug=""):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rot_dim = cos.shape[-1]
    if bug == "rotate-half-over-whole-head":
        q_half, k_half = rotate_half(q)[..., :rot_dim], rotate_half(k)[..., :rot_dim]
    q, q_pass = q[..., :rot_dim], q[..., rot_dim:]
    k, k_pass = k[..., :rot_dim], k[..., rot_dim:]
    if bug != "rotate-half-over-whole-head":
        q_half, k_half = rotate_half(q), rotate_half(k)
    q_embed = (q * cos) + (q_half * sin)
    k_embed = (k * cos) + (k_half * sin)
    return torch.cat((q_embed, q_pass), dim=-1), torch.cat((k_embed, k_pass), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class NemotronAttention(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.bug = heads, kv_heads, bug
        self.head_dim = dim // heads
        self.num_key_value_groups = heads // kv_heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.rotary_emb = NemotronRotaryEmbedding(self.head_dim // 2)        # partial_rotary_factor = 0.5

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin, bug=self.bug)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / self.head_dim ** 0.5
        if self.bug == "softmax-before-mask":
            attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32) + attention_mask
        else:
            attn_weights = nn.functional.softmax(attn_weights + attention_mask, dim=-1, dtype=torch.float32)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class NemotronDecoderLayer(nn.Module):
    def __init__(self, dim, heads, kv_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.input_layernorm = NemotronLayerNorm1P(dim)
        self.self_attn = NemotronAttention(dim, heads, kv_heads, bug)
        self.post_attention_layernorm = NemotronLayerNorm1P(dim)
        self.up_proj, self.down_proj = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(2 * dim, dim, bias=False)

    def forward(self, hidden_states):                                    # (B, T, D)
        bsz, seq_len, _ = hidden_states.shape
        position_ids = torch.arange(seq_len)[None].expand(bsz, -1)
        mask = torch.full((seq_len, seq_len), torch.finfo(hidden_states.dtype).min).triu(1)[None, None]
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.input_layernorm(hidden_states), mask, position_ids)
        mlp = self.down_proj(torch.relu(self.up_proj(self.post_attention_layernorm(hidden_states))) ** 2)
        return hidden_states + mlp


BUGS = ("rotate-half-over-whole-head", "softmax-before-mask")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return NemotronDecoderLayer(D, H, H_kv, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
