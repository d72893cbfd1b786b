"""huggingface/transformers issue #47328 ("Qwen2.5-Omni Token2Wav DiT uses mismatched RoPE layout (half-split
cos/sin with interleaved rotate) — regression from #39847", closed by the fix it proposes): the Token2Wav
DiT rotates its heads with ``rotate_half_codec``, which pairs adjacent features
(``x.reshape(..., -1, 2)``, ``stack((-x2, x1), -1)``: features 2i and 2i+1), and the released weights were
trained with an interleaved angle table (``[θ0, θ0, θ1, θ1, …]``). The refactor of #39847 made the rotary
module emit the half-split table ``cat((freqs, freqs), -1)`` (``[θ0, θ1, …, θ0, θ1, …]``), so each adjacent
pair was rotated by two different angles ("~9.9 → 6.7e-6 drift" once the layout was restored). The fix
emits ``repeat_interleave(freqs, 2)`` again and leaves ``rotate_half_codec`` as it is.

The reverse of tests/corpus/reports3/gpt_rope_pairing (there an interleaved table met a split-half
rotation; here a split-half table meets an interleaved rotation).

transformers' idiom: a ``RotaryEmbedding`` module with ``inv_freq`` returning ``(cos, sin)`` of
``(B, T, d)`` from ``inv_freq[None, :, None] @ position_ids[:, None, :]``, ``unsqueeze(1)`` on the heads,
``to_q``/``to_k``/``to_v`` Linears, ``view(B, -1, heads, head_dim).transpose(1, 2)``,
``F.scaled_dot_product_attention`` (the DiT attends both ways), ``transpose(1, 2).reshape``, ``to_out``.

Bug (argument): ``half-split-table``: the half-split angle table under the interleaved rotation."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("half-split-table",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def rotate_half_codec(x):
    x = x.reshape(*x.shape[:-1], -1, 2)                                     # (..., d/2, 2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return x.reshape(*x.shape[:-2], -1)                                     # (..., d)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                           # (B, 1, T, d)
    q_embed = (q * cos) + (rotate_half_codec(q) * sin)
    k_embed = (k * cos) + (rotate_half_codec(k) * sin)
    return q_embed, k_embed


class DiTRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, bug=""):
        super().__init__()
        self.bug = bug
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x):
        batch_size, seq_len = x.shape[0], x.shape[1]
        position_ids = torch.arange(seq_len).float()[None].expand(batch_size, -1)              # (B, T)
        inv_freq = self.inv_freq[None, :, None].expand(batch_size, -1, 1)                     # (B, d/2, 1)
        freqs = (inv_freq @ position_ids[:, None, :]).transpose(1, 2)                          # (B, T, d/2)
        if self.bug == "half-split-table":
            emb = torch.cat((freqs, freqs), dim=-1)                          # (B, T, d) [table]
        else:
            emb = torch.stack((freqs, freqs), dim=-1).reshape(batch_size, seq_len, -1)  # (B, T, d) [table]
        return emb.cos(), emb.sin()


class DiTAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, hidden_states, position_embeddings):
        batch_size = hidden_states.shape[0]
        query = self.to_q(hidden_states).view(batch_size, -1, self.heads, self.head_dim).transpose(1, 2)
        key = self.to_k(hidden_states).view(batch_size, -1, self.heads, self.head_dim).transpose(1, 2)
        value = self.to_v(hidden_states).view(batch_size, -1, self.heads, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        query, key = apply_rotary_pos_emb(query, key, cos, sin)              # (B, H, T, d)
        out = F.scaled_dot_product_attention(query, key, value)              # (B, H, T, d)
        out = out.transpose(1, 2).reshape(batch_size, -1, self.heads * self.head_dim)
        return self.to_out(out)


class DiTBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.rotary_embed = DiTRotaryEmbedding(dim // heads, bug=bug)
        self.attn = DiTAttention(dim, heads)

    def forward(self, x):
        return x + self.attn(x, self.rotary_embed(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return DiTBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
