"""huggingface/transformers, src/transformers/models/bart/modeling_bart.py (``BartAttention.forward``, the
eager path of v4.3x; https://github.com/huggingface/transformers/blob/v4.36.0/src/transformers/models/bart/
modeling_bart.py): ``_shape()`` to ``(bsz, H, T, d)``, the heads folded into the batch with ``proj_shape =
(bsz * num_heads, -1, head_dim)`` for ``bmm``, an additive ``[bsz, 1, tgt, src]`` mask added on a ``(bsz, H,
tgt, src)`` view and folded back, the output unfolded and transposed. The mask is built by the caller from
a ``[T, T]`` triangle of literal sizes (``torch.full((T, T), -inf).triu(1)``) and a key-padding mask, as the
model's ``_prepare_4d_causal_attention_mask`` hands it in.

Bugs (argument): ``out-no-transpose``: ``attn_output.view(bsz, H, tgt, d)`` reshaped straight to ``(bsz, tgt,
D)``; ``mask-view-heads-first``: the scores viewed ``(H, bsz, tgt, src)`` to add the mask (the folded axis is
batch-major)."""

import sys

import torch
from torch import nn

BUGS = ("out-no-transpose", "mask-view-heads-first")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BartAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj, self.v_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)
        self.q_proj, self.out_proj = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()  # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)  # (B·H, T, d)
        key_states = key_states.reshape(*proj_shape)  # (B·H, T, d)
        value_states = value_states.reshape(*proj_shape)  # (B·H, T, d)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))  # (B·H, T, T)
        if self.bug == "mask-view-heads-first":
            attn_weights = attn_weights.view(self.num_heads, bsz, tgt_len, src_len) + attention_mask.transpose(0, 1)
        else:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask  # (B, H, T, T)
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)  # (B·H, T, T)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)  # (B·H, T, d)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim)  # (B, H, T, d)
        if self.bug != "out-no-transpose":
            attn_output = attn_output.transpose(1, 2)  # (B, T, H, d)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)  # (B, T, D)
        return self.out_proj(attn_output)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    x = torch.randn(B, T, D)
    keep = torch.ones(B, T)
    keep[0, T - 2:] = 0  # the first sequence ends in two padding tokens
    causal = torch.full((T, T), float("-inf")).triu(1)  # (T, T), literal sizes
    mask = causal[None, None] + (1.0 - keep)[:, None, None, :] * torch.finfo(torch.float32).min  # (B, 1, T, T)
    return BartAttention(D, H, bug), (x, mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
