"""huggingface/transformers, src/transformers/models/bamba/modeling_bamba.py (v4.48, ``BambaAttention``,
``BambaRotaryEmbedding``, ``apply_rotary_pos_emb`` with ``partial_rotary_factor=0.5``, ``BambaMixer``,
``BambaDecoderLayer``; ``attn_layer_indices``): IBM's Bamba, a Mamba2 hybrid: a mixer layer then an attention
layer. The attention is Llama's with grouped-query heads and rotary over half of each head (``q[..., :rotary_dim]``
rotated, ``q[..., rotary_dim:]`` passed through, ``cat``), a causal additive mask. The mixer keeps Mamba2's
``in_proj`` (gate, ``xBC``, ``dt`` split), the depthwise ``Conv1d`` with ``padding=kernel-1`` trimmed back with
``[..., :seq_len]`` (causal), a gated ``RMSNorm``-free output; the SSM scan is reduced to a ``dt``-weighted
``cumsum`` over tokens (causal, as the scan is), so the file stays small.

Bugs: ``conv-trim-keeps-future``: the padded conv's output trimmed ``[..., kernel-1:]`` instead of ``[...,
:seq_len]`` (token ``t`` reads tokens up to ``t + kernel - 1``: the off-by-padding slip of a causal conv);
``causal-mask-diagonal``: the mask built ``triu(0)`` instead of ``triu(1)`` (every token masked from itself, the
first query from everything: the off-by-one of a causal mask)."""

import math
import sys

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


class BambaRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, partial_rotary_factor=0.5, base=10000.0):
        super().__init__()
        dim = int(head_dim * partial_rotary_factor)
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq_expanded @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class BambaAttention(nn.Module):
    def __init__(self, D, H, G):
        super().__init__()
        self.head_dim, self.num_key_value_groups = D // H, H // G
        self.q_proj = nn.Linear(D, H * self.head_dim, bias=False)
        self.k_proj = nn.Linear(D, G * self.head_dim, bias=False)
        self.v_proj = nn.Linear(D, G * self.head_dim, bias=False)
        self.o_proj = nn.Linear(H * self.head_dim, D, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        return self.o_proj(attn_output.reshape(*input_shape, -1))


class BambaMixer(nn.Module):
    def __init__(self, D, conv_kernel=4, bug=""):
        super().__init__()
        self.intermediate, self.conv_kernel, self.bug = 2 * D, conv_kernel, bug
        self.in_proj = nn.Linear(D, 2 * self.intermediate + 1)
        self.conv1d = nn.Conv1d(self.intermediate, self.intermediate, conv_kernel, groups=self.intermediate,
                                padding=conv_kernel - 1)
        self.out_proj = nn.Linear(self.intermediate, D)

    def forward(self, hidden_states):
        batch_size, seq_len, _ = hidden_states.shape
        projected_states = self.in_proj(hidden_states)
        gate, hidden_states_B_C, dt = projected_states.split([self.intermediate, self.intermediate, 1], dim=-1)
        conv_out = self.conv1d(hidden_states_B_C.transpose(1, 2))
        if self.bug == "conv-trim-keeps-future":
            conv_out = conv_out[..., self.conv_kernel - 1:]
        else:
            conv_out = conv_out[..., :seq_len]
        hidden_states_B_C = nn.functional.silu(conv_out.transpose(1, 2))
        scanned = torch.cumsum(hidden_states_B_C * nn.functional.softplus(dt), dim=1)
        return self.out_proj(scanned * nn.functional.silu(gate))


class BambaModel(nn.Module):
    def __init__(self, vocab, D, H, G, bug=""):
        super().__init__()
        self.bug = bug
        self.embed_tokens = nn.Embedding(vocab, D)
        self.rotary_emb = BambaRotaryEmbedding(D // H)
        self.norms = nn.ModuleList(nn.RMSNorm(D) for _ in range(5))
        self.mamba = BambaMixer(D, bug=bug)
        self.self_attn = BambaAttention(D, H, G)
        self.gate_proj, self.up_proj = nn.Linear(D, 2 * D, bias=False), nn.Linear(D, 2 * D, bias=False)
        self.down_proj = nn.Linear(2 * D, D, bias=False)

    def forward(self, input_ids):
        B, T = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        min_value = torch.finfo(hidden_states.dtype).min
        causal = torch.full((T, T), min_value).triu(0 if self.bug == "causal-mask-diagonal" else 1)[None, None]
        hidden_states = hidden_states + self.mamba(self.norms[0](hidden_states))
        hidden_states = hidden_states + self.self_attn(self.norms[1](hidden_states), position_embeddings, causal)
        h = self.norms[2](hidden_states)
        hidden_states = hidden_states + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))
        return self.norms[4](hidden_states)


BUGS = ("conv-trim-keeps-future", "causal-mask-diagonal")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4 H_kv=2",)
EQUAL = {"B=2 T=6 D=64 H=4 H_kv=2": "B=4 T=4 D=64 H=4 H_kv=2"}


def build(bug="", B=2, T=6, D=64, H=4, H_kv=2):
    torch.manual_seed(0)
    return BambaModel(50, D, H, H_kv, bug=bug).eval(), (torch.randint(0, 50, (B, T)),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
