"""huggingface/transformers, src/transformers/models/qwen2_vl/modeling_qwen2_vl.py
(``Qwen2VLRotaryEmbedding``, ``apply_multimodal_rotary_pos_emb``, ``Qwen2VLAttention``;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen2_vl/modeling_qwen2_vl.py):
three rows of positions ``position_ids (3, B, T)`` (temporal, height, width; equal for text), the table
``inv_freq[None, None, :, None].expand(3, B, -1, 1) @ position_ids[:, :, None, :]`` transposed to ``(3, B, T,
d/2)``, ``emb = torch.cat((freqs, freqs), dim=-1)``; M-RoPE picks section i of the feature axis from row ``i %
3``: ``mrope_section = mrope_section * 2``, ``torch.cat([m[i % 3] for i, m in
enumerate(cos.split(mrope_section, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)``; Llama's ``rotate_half``;
grouped keys widened by ``repeat_kv``; ``F.scaled_dot_product_attention(..., is_causal=True)``.

Bugs (argument): ``rotate-every-two``: the halves table (``cat((freqs, freqs))``, sections doubled over
the two halves) applied with GPT-J's interleaved ``rotate_every_two`` (``stack((-x[..., 1::2], x[...,
::2]), -1).flatten(-2)``), the pairing mismatch of ports between the two conventions;
``merge-no-transpose``: ``attn_output.reshape(bsz, q_len, -1)`` straight from ``(B, H, T, d)``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("rotate-every-two", "merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


class Qwen2VLRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        # In contrast to other models, Qwen2_VL has different position ids for the grids
        inv_freq_expanded = self.inv_freq[None, None, :, None].float().expand(3, position_ids.shape[1], -1, 1)
        position_ids_expanded = position_ids[:, :, None, :].float()  # (3, B, 1, T)
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(2, 3)  # (3, B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (3, B, T, d)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)  # (B, H, T, d)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)  # (B, H, T, d)


def apply_multimodal_rotary_pos_emb(q, k, cos, sin, mrope_section, unsqueeze_dim=1, bug=""):
    rotate = rotate_every_two if bug == "rotate-every-two" else rotate_half
    mrope_section = mrope_section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(mrope_section, dim=-1))], dim=-1).unsqueeze(
        unsqueeze_dim
    )  # (B, 1, T, d)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(mrope_section, dim=-1))], dim=-1).unsqueeze(
        unsqueeze_dim
    )
    q_embed = (q * cos) + (rotate(q) * sin)
    k_embed = (k * cos) + (rotate(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)  # (B, H, T, d)


class Qwen2VLAttention(nn.Module):
    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, bug=""):
        super().__init__()
        self.bug = bug
        self.num_heads, self.num_key_value_heads = num_heads, num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.rope_scaling = {"mrope_section": [self.head_dim // 8, self.head_dim // 8, self.head_dim // 4]}
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.rotary_emb = Qwen2VLRotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)  # (B, H, T, d)
        key_states = key_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)  # (B, H_kv, T, d)
        value_states = value_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)  # (B, H_kv, T, d)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = apply_multimodal_rotary_pos_emb(
            query_states, key_states, cos, sin, self.rope_scaling["mrope_section"], 1, self.bug
        )
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output = F.scaled_dot_product_attention(
            query_states, key_states, value_states, is_causal=q_len > 1
        )  # (B, H, T, d)
        if self.bug != "merge-no-transpose":
            attn_output = attn_output.transpose(1, 2).contiguous()  # (B, T, H, d)
        attn_output = attn_output.reshape(bsz, q_len, -1)  # (B, T, D)
        return self.o_proj(attn_output)


class TextOnlyPositions(nn.Module):
    """``get_rope_index`` for a text-only prompt: the three rows are the same ``arange`` positions."""

    def __init__(self, hidden_size=32, num_heads=4, num_kv_heads=2, bug=""):
        super().__init__()
        self.self_attn = Qwen2VLAttention(hidden_size, num_heads, num_kv_heads, bug)

    def forward(self, inputs_embeds):
        batch, seq_len = inputs_embeds.shape[:2]
        position_ids = torch.arange(seq_len).view(1, 1, -1).expand(3, batch, -1)  # (3, B, T)
        return self.self_attn(inputs_embeds, position_ids)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4 H_kv=2': embedded tokens (B, T, D), two key/value groups."""
    torch.manual_seed(0)
    return TextOnlyPositions(D, H, 2, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
