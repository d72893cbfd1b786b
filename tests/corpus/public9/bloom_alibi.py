"""huggingface/transformers, src/transformers/models/bloom/modeling_bloom.py (``build_alibi_tensor``:
``slopes = torch.pow(base, powers)`` from ``closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))``, a
Python int, positions ``((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]``, ``alibi =
slopes[..., None] * arange_tensor`` then ``alibi.reshape(batch_size * num_heads, 1, seq_length)``;
``BloomAttention.forward``: ``alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=self.beta,
alpha=self.inv_norm_factor)`` over the ``(B·H)`` fold, a fused ``[H, 3, d]`` projection;
https://github.com/huggingface/transformers/blob/main/src/transformers/models/bloom/modeling_bloom.py).

Twin (correct): ``megatron-repeat``: the slopes laid ``[H, 1, T]`` over plain positions and widened with
``alibi.repeat(batch_size, 1, 1)`` (bigscience-workshop/Megatron-DeepSpeed's ``_build_alibi_tensor``): entry
``b·H + h`` is head h's slope, as the scores' fold is.

Bugs (argument): ``fold-heads-major``: the alibi transposed to ``[H, B, T]`` before the fold, so entry ``b·H +
h`` reads the slope of head ``(b·H + h) // B``: slopes indexed by the batch; ``megatron-repeat-interleave``:
Megatron's table widened with ``repeat_interleave(batch_size, 0)`` instead of ``repeat`` (the same
head-major fold); ``slopes-sign``: the slopes negated, so the bias grows with the distance."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("fold-heads-major", "megatron-repeat-interleave", "slopes-sign")
TWINS = ("megatron-repeat",)
DIMS = ("B=2 T=6 D=64 H=4",)


def slopes_of(num_heads, sign=1.0):
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    return sign * torch.pow(base, powers)                                          # (H,)


def build_alibi_tensor(attention_mask, num_heads, bug=""):
    batch_size, seq_length = attention_mask.shape
    slopes = slopes_of(num_heads, -1.0 if bug == "slopes-sign" else 1.0)            # (H,)
    if bug.startswith("megatron"):
        positions = torch.arange(seq_length, dtype=torch.float32)                    # (T,)
        alibi = slopes[:, None, None] * positions[None, None, :]                     # (H, 1, T)
        if bug == "megatron-repeat-interleave":
            return alibi.repeat_interleave(batch_size, 0)                            # bug: (H·B, 1, T)
        return alibi.repeat(batch_size, 1, 1)                                        # (B·H, 1, T)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]   # (B, 1, T)
    alibi = slopes[..., None] * arange_tensor                                        # (B, H, T)
    if bug == "fold-heads-major":
        alibi = alibi.transpose(0, 1)                                                # bug: (H, B, T)
    return alibi.reshape(batch_size * num_heads, 1, seq_length)                      # (B·H, 1, T)


class BloomAttention(nn.Module):
    def __init__(self, d, h, bug=""):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.inv_norm_factor = 1.0 / math.sqrt(self.hd)
        self.query_key_value = nn.Linear(d, 3 * d)
        self.dense = nn.Linear(d, d)

    def forward(self, hidden_states, attention_mask):
        B, T, _ = hidden_states.shape
        alibi = build_alibi_tensor(attention_mask, self.h, self.bug)
        fused = self.query_key_value(hidden_states).view(B, T, self.h, 3, self.hd)   # (B, T, H, 3, d_k)
        q, k, v = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]              # (B, T, H, d_k)
        q = q.transpose(1, 2).reshape(B * self.h, T, self.hd)                       # (B·H, T, d_k)
        k = k.permute(0, 2, 3, 1).reshape(B * self.h, self.hd, T)                   # (B·H, d_k, T)
        v = v.transpose(1, 2).reshape(B * self.h, T, self.hd)                       # (B·H, T, d_k)
        scores = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=self.inv_norm_factor)   # (B·H, T, T)
        scores = scores.view(B, self.h, T, T)                                       # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)                         # (T, T)
        pad = ~attention_mask.bool()[:, None, None, :]                              # (B, 1, 1, T)
        scores = scores.masked_fill(causal | pad, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32)
        probs = probs.view(B * self.h, T, T)                                        # (B·H, T, T)
        ctx = torch.bmm(probs, v)                                                   # (B·H, T, d_k)
        ctx = ctx.view(B, self.h, T, self.hd).permute(0, 2, 1, 3)                   # (B, T, H, d_k)
        return self.dense(ctx.reshape(B, T, self.h * self.hd))                      # (B, T, D)


def build(bug="", B=2, T=6, D=64, H=4):
    """--dims 'B=2 T=6 D=64 H=4': hidden states (B, T, D) and a 0/1 mask (B, T), the last entry's last
    token padded where B > 1."""
    torch.manual_seed(0)
    mask = torch.ones(B, T, dtype=torch.long)
    if B > 1:
        mask[-1, -1:] = 0
    return BloomAttention(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
