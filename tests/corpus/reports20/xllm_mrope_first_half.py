"""xLLM-AI/xllm pull request #746 ("bugfix: fix mrope calculation in the multimodal situation.", merged): xLLM
builds the rotary table already doubled, ``cat([freqs, freqs])`` over the head features, and then picked
M-RoPE's temporal / height / width sections from the first half of it only, so the second half of every
image token's table stayed the temporal row's; "need to select the mrope part from both sections". With
``rotate_half`` the feature ``i`` and ``i + d/2`` form one rotation pair, and the pair's two coordinates were
turned by different angles (a height or width angle and a temporal angle) wherever the three position rows
differ: on image tokens. Text-only prompts (three equal rows) were unaffected.

The idiom (Qwen2-VL as Hugging Face writes it, which xLLM ports to libtorch): ``get_rope_index`` gives text
tokens one position on all three rows and an image's patches ``(t, h, w)`` grid positions after the text;
``inv_freq[None, None, :, None].expand(3, B, -1, 1) @ position_ids[:, :, None, :]``, ``emb = cat((freqs,
freqs), -1)``; ``mrope_section * 2`` split over the doubled table, section ``i`` from row ``i % 3``;
``rotate_half``; ``repeat_kv``; ``scaled_dot_product_attention(is_causal=True)``; ``o_proj``.

Bug (argument): ``sections-first-half``: the sections picked from ``cos[..., :d/2]`` only, the second half
left as the temporal row's."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("sections-first-half",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def select_mrope(table, mrope_section, bug):
    """(3, B, T, d) -> (B, 1, T, d): section i of the features from position row i % 3."""
    if bug == "sections-first-half":
        half = table.shape[-1] // 2
        first = torch.cat([m[i % 3] for i, m in enumerate(table[..., :half].split(mrope_section, dim=-1))], dim=-1)
        return torch.cat([first, table[0, ..., half:]], dim=-1).unsqueeze(1)                    # [mrope]
    doubled = mrope_section * 2
    return torch.cat([m[i % 3] for i, m in enumerate(table.split(doubled, dim=-1))], dim=-1).unsqueeze(1)


class Qwen2VLAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.bug, self.head_dim = bug, hidden_size // num_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.mrope_section = [self.head_dim // 8, self.head_dim // 8, self.head_dim // 4]
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, hidden_states, position_ids):                          # (B, T, D), (3, B, T)
        bsz, q_len, _ = hidden_states.shape
        query_states = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        inv_freq_expanded = self.inv_freq[None, None, :, None].expand(3, bsz, -1, 1)
        freqs = (inv_freq_expanded @ position_ids[:, :, None, :].float()).transpose(2, 3)    # (3, B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = select_mrope(emb.cos(), self.mrope_section, self.bug)
        sin = select_mrope(emb.sin(), self.mrope_section, self.bug)
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, is_causal=True)
        return self.o_proj(attn_output.transpose(1, 2).reshape(bsz, q_len, -1))


class ImagePrompt(nn.Module):
    """``get_rope_index`` for two text tokens and then one image of ``(1, 2, (T - 2) // 2)`` patches."""

    def __init__(self, hidden_size, num_heads, num_kv_heads, bug=""):
        super().__init__()
        self.self_attn = Qwen2VLAttention(hidden_size, num_heads, num_kv_heads, bug)

    def forward(self, inputs_embeds):
        batch, seq_len = inputs_embeds.shape[:2]
        text = torch.arange(2).view(1, -1).expand(3, -1)                                       # (3, 2)
        grid_w = (seq_len - 2) // 2
        patch = torch.arange(seq_len - 2)
        image = torch.stack([torch.zeros_like(patch), patch // grid_w, patch % grid_w]) + 2    # (3, T - 2)
        position_ids = torch.cat([text, image], dim=1)[:, None, :].expand(3, batch, seq_len)
        return self.self_attn(inputs_embeds, position_ids)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return ImagePrompt(D, H, 2, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
