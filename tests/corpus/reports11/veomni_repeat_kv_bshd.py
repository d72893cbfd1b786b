"""ByteDance-Seed/VeOmni PR #162 ("fix: repeat kv bug in flash attention forward with ulysses", merged): the
flash-attention entry took its keys and values as ``(bs, seq, nhead, head_dim)`` but widened the grouped
key/value heads with transformers' ``repeat_kv``, which assumes ``(bs, nhead, seq, head_dim)``: on the
``bshd`` layout it repeated each *token* ``n_rep`` times (``(bs, seq·n_rep, kv_heads, d)``) instead of each
head, and the grouped-query kernel took the repeated tokens as the keys. The fix repeats along the heads axis
of the ``bshd`` tensor (``repeat_interleave(n_rep, dim=2)``).

The idiom: a Qwen2-style grouped-query attention (``q_proj`` to ``H`` heads, ``k_proj``/``v_proj`` to
``H_kv = H / 2``), states kept ``(B, T, heads, d)`` as flash-attention wants them, a causal
``flash_attention_forward`` that moves the heads forward and calls ``scaled_dot_product_attention(...,
is_causal=True, enable_gqa=True)``, the heads widened before the kernel (as the Ulysses path does).

The sizes name the key/value heads (``H_kv=2``), as a user of a grouped-query model gives them.

Bug (argument): ``repeat-kv-on-bshd``: ``repeat_kv`` applied to the ``bshd`` keys and values (tokens
repeated; with the causal mask aligned top-left, query i then reads only tokens up to i / n_rep)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("repeat-kv-on-bshd",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def repeat_kv(hidden_states, n_rep):                                           # (b, kv, s, d) assumed
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def flash_attention_forward(query, key, value, n_repeat, bug=""):              # (B, T, heads, d) each
    if bug == "repeat-kv-on-bshd":
        key, value = repeat_kv(key, n_repeat), repeat_kv(value, n_repeat)      # [gqa] (B, T·n, H_kv, d)
    else:
        key = key.repeat_interleave(n_repeat, dim=2)                           # [gqa] (B, T, H, d)
        value = value.repeat_interleave(n_repeat, dim=2)
    out = F.scaled_dot_product_attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                         is_causal=True, enable_gqa=True)      # (B, H, T, d)
    return out.transpose(1, 2)                                                 # (B, T, H, d)


class Qwen2Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.bug = heads, heads // 2, dim // heads, bug
        self.q_proj = nn.Linear(dim, heads * self.head_dim)
        self.k_proj = nn.Linear(dim, self.kv_heads * self.head_dim)
        self.v_proj = nn.Linear(dim, self.kv_heads * self.head_dim)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, hidden_states):                                          # (B, T, D)
        b, t, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(b, t, self.heads, self.head_dim)    # (B, T, H, d)
        k = self.k_proj(hidden_states).view(b, t, self.kv_heads, self.head_dim)  # (B, T, H_kv, d)
        v = self.v_proj(hidden_states).view(b, t, self.kv_heads, self.head_dim)
        out = flash_attention_forward(q, k, v, self.heads // self.kv_heads, self.bug)
        return self.o_proj(out.reshape(b, t, -1))                              # (B, T, D)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Qwen2Attention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
