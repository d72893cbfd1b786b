"""huggingface/transformers, src/transformers/models/modernbert/modeling_modernbert.py (v4.48,
``ModernBertAttention`` with ``sdpa_attention_forward``, ``ModernBertModel._update_attention_mask``): a fused
``Wqkv`` viewed ``(bs, T, 3, H, d)``, ``qkv.transpose(3, 1).unbind(dim=2)``, Llama's ``rotate_half`` rotary with
a global base (160000) on global layers and a local base (10000) on local ones, every third layer global
(``layer_id % global_attn_every_n_layers == 0``); the padding mask expanded ``[:, None, None, :]`` to an additive
``(bs, 1, T, T)`` mask, the sliding-window mask made from ``distance = torch.abs(rows - rows.T)``,
``window_mask = distance <= local_attention // 2`` and ``global_mask.masked_fill(window_mask.logical_not(),
min)``; ``F.scaled_dot_product_attention(..., attn_mask=...)``, ``transpose(1, 2).contiguous().view(bs, -1, dim)``,
``Wo``.

Bugs (argument): ``window-inverted``: ``masked_fill(window_mask, min)`` (the ``logical_not`` left out: the window
hidden instead of what lies outside it; each token then ignores itself and its neighbours);
``padding-on-queries``: the padding mask expanded ``[:, None, :, None]`` (the padded positions hidden as
queries rather than as keys, a natural slip of the two ``None``s: every query still reads the padding
tokens)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class ModernBertRotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, position_ids):                                          # (1, T)
        freqs = (self.inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)  # (1, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)                               # (1, T, d)
        return emb.cos(), emb.sin()


class ModernBertAttention(nn.Module):
    def __init__(self, dim, heads, layer_id, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.local = layer_id % 3 != 0
        self.Wqkv, self.Wo = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.rotary_emb = ModernBertRotaryEmbedding(self.head_dim, 10000.0 if self.local else 160000.0)

    def forward(self, hidden_states, position_ids, attention_mask, sliding_window_mask):
        bs, _, dim = hidden_states.shape
        qkv = self.Wqkv(hidden_states).view(bs, -1, 3, self.heads, self.head_dim)   # (bs, T, 3, H, d)
        query, key, value = qkv.transpose(3, 1).unbind(dim=2)                        # (bs, H, T, d)
        cos, sin = self.rotary_emb(position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                                # (1, 1, T, d)
        query = query * cos + rotate_half(query) * sin
        key = key * cos + rotate_half(key) * sin
        mask = sliding_window_mask if self.local else attention_mask
        attn = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)    # (bs, H, T, d)
        attn = attn.transpose(1, 2).contiguous().view(bs, -1, dim)                   # (bs, T, dim)
        return self.Wo(attn)


class ModernBertModel(nn.Module):
    def __init__(self, dim, heads, bug="", layers=2, local_attention=4):
        super().__init__()
        self.bug, self.local_attention = bug, local_attention
        self.layers = nn.ModuleList(ModernBertAttention(dim, heads, i, bug) for i in range(layers))
        self.norm = nn.LayerNorm(dim)

    def _update_attention_mask(self, attention_mask, dtype):
        bs, seq_len = attention_mask.shape
        if self.bug == "padding-on-queries":
            expanded = attention_mask[:, None, :, None].expand(bs, 1, seq_len, seq_len).to(dtype)
        else:
            expanded = attention_mask[:, None, None, :].expand(bs, 1, seq_len, seq_len).to(dtype)
        global_attention_mask = (1.0 - expanded).masked_fill((1.0 - expanded).bool(), torch.finfo(dtype).min)
        rows = torch.arange(seq_len).unsqueeze(0)                                     # (1, T)
        distance = torch.abs(rows - rows.T)                                          # (T, T)
        window_mask = (distance <= self.local_attention // 2).unsqueeze(0).unsqueeze(0)
        hide = window_mask if self.bug == "window-inverted" else window_mask.logical_not()
        sliding_window_mask = global_attention_mask.masked_fill(hide, torch.finfo(dtype).min)
        return global_attention_mask, sliding_window_mask

    def forward(self, hidden_states, attention_mask):                               # (bs, T, dim), (bs, T)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        global_mask, sliding_mask = self._update_attention_mask(attention_mask, hidden_states.dtype)
        for layer in self.layers:
            hidden_states = hidden_states + layer(self.norm(hidden_states), position_ids, global_mask, sliding_mask)
        return hidden_states


BUGS = ("window-inverted", "padding-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[-1, -2:] = 0                                                       # the last row padded
    return ModernBertModel(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
