"""huggingface/transformers, models/gpt_bigcode/modeling_gpt_bigcode.py (``GPTBigCodeAttention``, the
eager ``_attn`` of StarCoder's multi-query attention): one fused ``c_attn`` cut by ``split((embed_dim,
2 * kv_dim), dim=2)`` then ``split((head_dim, head_dim), dim=-1)``; the queries folded ``reshape(B, T * H,
d_k)`` so that one ``baddbmm`` against the single key head ``(B, d_k, S)`` makes ``(B, T·H, S)``, viewed
``(B, T, H, S)``; the causal mask ``bias[None, S - T : S, :S]`` unsqueezed at 2 (``unsqueeze(2 if
self.multi_query else 1)`` in ``GPTBigCodeModel.forward``) and applied with ``torch.where``; the output
``bmm(attn_weights.view(attn_view), value).view(query_shape)``.

Bugs (argument): ``mask-mha-axis``: the multi-head branch's ``unsqueeze(1)`` used with the multi-query
layout: a ``(1, 1, T, S)`` mask on ``(B, T, H, S)`` scores lines the queries up with the heads (it only
broadcasts where T = H); ``heads-first``: ``attn_shape = (B, H, T, S)``,
the multi-head layout (with its mask, ``unsqueeze(1)``), for rows laid out token-major: each "head" row
holds a mix of tokens and heads. ``mask-mha-axis`` raises unless T = H; both are traced at T = H."""

import sys

import torch
from torch import nn

BUGS = ("mask-mha-axis", "heads-first")
DIMS = ("B=2 T=6 D=32 H=4", "B=2 T=4 D=32 H=4")


class GPTBigCodeAttention(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.kv_dim = self.head_dim  # multi_query: one key/value head
        self.c_attn = nn.Linear(embed_dim, embed_dim + 2 * self.kv_dim)
        self.c_proj = nn.Linear(embed_dim, embed_dim)

    def _attn(self, query, key, value, attention_mask=None):
        scale_factor = 1 / self.head_dim**0.5
        query_shape = query.shape
        batch_size = query_shape[0]
        key_length = key.size(-1)
        query_length = query_shape[1]
        if self.bug == "heads-first":
            attn_shape = (batch_size, self.num_heads, query_length, key_length)  # bug: rows are (T, H)
        else:
            attn_shape = (batch_size, query_length, self.num_heads, key_length)  # (B, T, H, S)
        attn_view = (batch_size, query_length * self.num_heads, key_length)  # (B, T·H, S)
        query = query.reshape(batch_size, query_length * self.num_heads, self.head_dim)  # (B, T·H, d_k)
        attn_weights = torch.empty(attn_view, device=query.device, dtype=query.dtype)
        attn_weights = torch.zeros_like(attn_weights)
        attn_weights = torch.baddbmm(attn_weights, query, key, beta=1, alpha=scale_factor).view(attn_shape)
        if attention_mask is not None:
            mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
            attn_weights = torch.where(attention_mask, attn_weights, mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights.view(attn_view), value).view(query_shape)  # (B, T, D)
        return attn_output, attn_weights

    def forward(self, hidden_states, attention_mask=None):
        query, key_value = self.c_attn(hidden_states).split((self.embed_dim, 2 * self.kv_dim), dim=2)
        key, value = key_value.split((self.head_dim, self.head_dim), dim=-1)  # (B, S, d_k) each
        attn_output, _ = self._attn(query, key.transpose(-1, -2), value, attention_mask)
        return self.c_proj(attn_output)


class GPTBigCode(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4, max_positions=16, bug=""):
        super().__init__()
        self.bug = bug
        self.attn = GPTBigCodeAttention(embed_dim, num_heads, bug)
        self.register_buffer("bias", torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)),
                             persistent=False)

    def forward(self, hidden_states):
        query_length = hidden_states.shape[1]
        key_length = query_length
        self_attention_mask = self.bias[None, key_length - query_length : key_length, :key_length]  # (1, T, S)
        if self.bug in ("mask-mha-axis", "heads-first"):
            self_attention_mask = self_attention_mask.unsqueeze(1)  # bug: (1, 1, T, S)
        else:
            self_attention_mask = self_attention_mask.unsqueeze(2)  # (1, T, 1, S)
        return self.attn(hidden_states, self_attention_mask)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims 'B=2 T=6 D=32 H=4'."""
    torch.manual_seed(0)
    return GPTBigCode(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
