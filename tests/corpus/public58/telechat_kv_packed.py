"""Tele-AI/Telechat, ``modeling_telechat.py`` of the TeleChat-7B checkpoint (``TelechatAttention.forward`` on its
eager path, ``_merge_heads``, ``apply_rotary_pos_emb_torch``, ``TelechatModel._prepare_attn_mask`` with
``_make_causal_mask`` and ``_expand_mask``; https://github.com/Tele-AI/Telechat): the Bloom-derived attention with a
separate ``query`` and a fused ``key_value`` packed per head. ``hidden_states.transpose(1, 0)`` to ``[sq, b, h]``;
``query`` viewed ``(sq, b, np, hn)``; ``key_value`` viewed ``(sq, b, n_kv, 2 * hn)`` and cut by
``split_tensor_along_last_dim(mixed_kv_layer, 2)``; the queries and keys folded ``view(sq, b * np, -1)`` for the
rotary (``cos[offset:sq + offset]`` of shape ``[sq, 1, hn]``, ``rotate_half``); the scores ``inv_norm_factor *
einsum('bik,bkj->bij', q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2))`` viewed ``(bz, np, sq, sk)``,
``masked_fill(attention_mask, finfo.min)``, ``softmax(dim=-1)``, ``bmm`` with the values ``reshape(sk, bz * np,
dim).transpose(0, 1)``; ``_merge_heads``: ``view(bz, np, sq, hn).permute(0, 2, 1, 3).reshape(bz, sq, np * hn)``
(batch-first again) and ``dense``. The mask: ``_make_causal_mask`` (``arange(tgt)[:, None] < arange(src)``) or-ed
with ``_expand_mask`` (``~mask[:, None, None, :]`` expanded to ``(bsz, 1, tgt, src)``). Right-padded batch.

Bugs: ``kv-split-flat``: the fused keys and values cut in two halves of the whole width (``chunk(2, dim=-1)``)
before the head view (the per-head ``[k_h | v_h]`` packing read as ``[all keys | all values]``: half the "key"
heads are value columns); ``merge-heads-no-permute``: ``_merge_heads`` reshaped to ``(bz, sq, np * hn)`` from
``(bz, np, sq, hn)`` without the ``permute(0, 2, 1, 3)``; ``pad-mask-on-queries``: the padding expanded as
``mask[:, None, :, None]`` (the padded rows hidden instead of the padded keys)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=x1.ndim - 1)


def apply_rotary_pos_emb_torch(q, k, cos, sin, offset=0):
    cos, sin = cos[offset:q.shape[0] + offset, ...], sin[offset:q.shape[0] + offset, ...]
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, seq_len):
        freqs = torch.einsum("i,j->ij", torch.arange(seq_len).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[:, None, :], emb.sin()[:, None, :]                            # (sq, 1, hn)


class TelechatAttention(nn.Module):
    def __init__(self, hidden_size, n_head, bug=""):
        super().__init__()
        self.num_heads = self.num_key_value_heads = n_head
        self.head_dim, self.bug = hidden_size // n_head, bug
        self.query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key_value = nn.Linear(hidden_size, 2 * hidden_size, bias=False)
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.rotary_emb = RotaryEmbedding(self.head_dim)
        self.inv_norm_factor = self.head_dim ** -0.5

    def _merge_heads(self, x):
        batch_size_and_num_heads, seq_length, _ = x.shape
        batch_size = batch_size_and_num_heads // self.num_heads
        x = x.view(batch_size, self.num_heads, seq_length, self.head_dim)            # (bz, np, sq, hn)
        if self.bug != "merge-heads-no-permute":
            x = x.permute(0, 2, 1, 3)                                                 # (bz, sq, np, hn)
        return x.reshape(batch_size, seq_length, self.num_heads * self.head_dim)      # (bz, sq, hp)

    def forward(self, hidden_states, residual, attention_mask):
        hidden_states = hidden_states.transpose(1, 0)                                 # (sq, bz, hp)
        query_layer = self.query(hidden_states)
        query_layer = query_layer.view(*query_layer.size()[:-1], self.num_heads, self.head_dim)  # (sq, bz, np, hn)
        mixed_kv_layer = self.key_value(hidden_states)                                # (sq, bz, 2 * hp)
        if self.bug == "kv-split-flat":
            key_layer, value_layer = [t.contiguous().view(*t.size()[:-1], self.num_key_value_heads, self.head_dim)
                                      for t in mixed_kv_layer.chunk(2, dim=-1)]
        else:
            mixed_kv_layer = mixed_kv_layer.view(*mixed_kv_layer.size()[:-1], self.num_key_value_heads,
                                                 2 * self.head_dim)                   # (sq, bz, n_kv, 2 * hn)
            key_layer, value_layer = torch.split(mixed_kv_layer, self.head_dim, dim=-1)  # (sq, bz, n_kv, hn)
        s_query, bz, head, dim = value_layer.shape
        query_layer = query_layer.reshape(s_query, bz * self.num_heads, dim)         # (sq, bz * np, hn)
        key_layer = key_layer.reshape(s_query, bz * head, dim)                        # (sk, bz * np, hn)
        cos, sin = self.rotary_emb(s_query)
        query_layer, key_layer = apply_rotary_pos_emb_torch(query_layer, key_layer, cos, sin, offset=0)
        matmul_result = self.inv_norm_factor * torch.einsum("bik,bkj->bij", query_layer.transpose(0, 1),
                                                            key_layer.transpose(0, 1).transpose(1, 2))
        attention_scores = matmul_result.view(bz, self.num_heads, s_query, s_query)   # (bz, np, sq, sk)
        attn_weights = torch.masked_fill(attention_scores, attention_mask, torch.finfo(attention_scores.dtype).min)
        attention_probs = F.softmax(attn_weights, dim=-1)
        attention_probs_reshaped = attention_probs.view(bz * self.num_heads, s_query, s_query)
        value_layer = value_layer.reshape(s_query, bz * self.num_heads, dim)          # (sk, bz * np, hn)
        context_layer = torch.bmm(attention_probs_reshaped, value_layer.transpose(0, 1))  # (bz * np, sq, hn)
        return residual + self.dense(self._merge_heads(context_layer))                # (bz, sq, hp)


class TelechatSketch(nn.Module):
    def __init__(self, hidden_size, n_head, bug=""):
        super().__init__()
        self.bug = bug
        self.input_layernorm = nn.RMSNorm(hidden_size, eps=1e-5)
        self.self_attention = TelechatAttention(hidden_size, n_head, bug)

    def forward(self, inputs_embeds, attention_mask):                                 # (bz, sq, hp), (bz, sq)
        batch_size, seq_length, _ = inputs_embeds.shape
        causal = torch.arange(seq_length)[:, None] < torch.arange(seq_length)[None, :]
        causal = causal[None, None, :, :].expand(batch_size, 1, seq_length, seq_length)
        if self.bug == "pad-mask-on-queries":
            expanded = ~(attention_mask[:, None, :, None].to(torch.bool))
        else:
            expanded = ~(attention_mask[:, None, None, :].to(torch.bool))
        expanded = expanded.expand(batch_size, 1, seq_length, seq_length)
        causal_mask = expanded | causal                                               # (bz, 1, sq, sk)
        return self.self_attention(self.input_layernorm(inputs_embeds), inputs_embeds, causal_mask)


BUGS = ("kv-split-flat", "merge-heads-no-permute", "pad-mask-on-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):
    """The first row full, the others right-padded by two."""
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, -2:] = 0
    return TelechatSketch(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
