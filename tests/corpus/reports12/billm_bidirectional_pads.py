"""WhereIsAI/BiLLM issue #6 ("Interaction of padding and bidirectional mask"): BiLLM turns Mistral's decoder
bidirectional by replacing the causal 4-d mask with an all-open one, and the report reads its
``modeling_mistral`` as building that mask without the padding ("it seems like even the padding tokens in a
batch will get unmasked, whereas they should remain masked in both unidirectional and bidirectional
attention"). With right padding, every real token of the shorter sequences then attends to their padding
tokens, and its state changes with the batch's longest sequence.

The idiom: transformers' Mistral attention (``q_proj``/``k_proj``/``v_proj`` with fewer kv heads,
``view(bsz, q_len, -1, head_dim).transpose(1, 2)``, ``rotate_half`` rotary from ``position_ids``,
``repeat_kv``, ``matmul`` scores plus a ``(B, 1, T, T)`` additive mask, ``softmax`` in float32, ``o_proj``),
the mask built by ``_prepare_4d_attention_mask`` (the padding expanded to every query, no causal part).

Bug (argument): ``unmask-pads``: the bidirectional mask ``zeros(B, 1, T, T)``, the padding dropped."""

import sys

import torch
from torch import nn

BUGS = ("unmask-pads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4 H_kv=2",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def prepare_4d_attention_mask(mask, dtype, tgt_len):
    bsz, src_len = mask.size()
    expanded = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted = 1.0 - expanded
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)


class MistralAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, base=10000.0):
        super().__init__()
        self.num_heads, self.num_key_value_heads = heads, kv_heads
        self.head_dim = hidden // heads
        self.num_key_value_groups = heads // kv_heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]          # (B, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]                               # (B, 1, T, d)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5         # (B, H, T, T)
        attn_weights = attn_weights + attention_mask                                     # [mask]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()
        return self.o_proj(out.reshape(bsz, q_len, -1))


class BiMistralLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, bug=""):
        super().__init__()
        self.bug = bug
        self.input_layernorm = nn.LayerNorm(hidden)
        self.self_attn = MistralAttention(hidden, heads, kv_heads)

    def forward(self, hidden_states, attention_mask):                                   # (B, T, D), (B, T)
        bsz, seq_len, _ = hidden_states.shape
        position_ids = torch.arange(seq_len).unsqueeze(0).expand(bsz, -1)
        if self.bug == "unmask-pads":
            mask = torch.zeros(bsz, 1, seq_len, seq_len, dtype=hidden_states.dtype)    # [mask-build]
        else:
            mask = prepare_4d_attention_mask(attention_mask, hidden_states.dtype, seq_len)   # [mask-build]
        return hidden_states + self.self_attn(self.input_layernorm(hidden_states), mask, position_ids)


def build(bug="", B=2, T=6, D=32, H=4, H_kv=2):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1:, T - 2:] = 0                                                      # right padding
    return BiMistralLayer(D, H, H_kv, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
