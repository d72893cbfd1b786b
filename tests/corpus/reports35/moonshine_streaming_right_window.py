"""huggingface/transformers pull request #47010 ("Fix off-by-one in sliding_window_mask_function right window
boundary", 2026, fixes #46305; the same fix again in #47162): Moonshine Streaming's encoder builds each layer's
local attention with ``sliding_window_mask_function((left, right))``, and the right (future) side used a strict
``-dist < right_window_size``, so ``right_window_size = 4`` attended 3 future frames, not 4 (the Moonshine v2
paper: a right window of 4 is an 80 ms lookahead at 50 Hz, the code gave 60 ms); the fix is ``<=``. The
generated ``modeling_moonshine_streaming.py`` and Gemma-4's standalone copy had the same line.

The idiom (``MoonshineStreamingEncoder``'s attention, eager path): ``q_proj``/``k_proj``/``v_proj``/``o_proj``,
``view(B, T, H, d)`` and ``transpose(1, 2)``; the band from ``dist = q_idx - kv_idx`` (``left``: ``0 <= dist <
left``, the query itself and ``left - 1`` past frames; ``right``: ``0 < -dist <= right``) combined with the
frames' padding mask ``attention_mask [B, T]`` on the key axis, as an additive ``-inf`` mask ``[B, 1, T, T]``;
``softmax(q k^T * d^-0.5)``, heads merged.

Bug (window): ``right-window-strict``: ``-dist < right_window_size``."""

import sys

import torch
from torch import nn

BUGS = ("right-window-strict",)
TWINS = ()
DIMS = ("B=2 T=8 D=32 H=4",)


def sliding_window_mask_function(sliding_window, strict_right=False):
    left_window_size, right_window_size = sliding_window

    def inner_mask(q_idx, kv_idx):
        dist = q_idx - kv_idx
        left_mask = (dist >= 0) & (dist < left_window_size)
        if strict_right:
            right_mask = (dist < 0) & (-dist < right_window_size)
        else:
            right_mask = (dist < 0) & (-dist <= right_window_size)
        return left_mask | right_mask

    return inner_mask


class MoonshineStreamingEncoderAttention(nn.Module):
    def __init__(self, hidden, num_heads, sliding_window=(4, 2), bug=""):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden // num_heads
        self.mask_function = sliding_window_mask_function(sliding_window, strict_right=bug == "right-window-strict")
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states, attention_mask):
        B, T, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d)
        k = self.k_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d)
        v = self.v_proj(hidden_states).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, d)
        positions = torch.arange(T)
        band = self.mask_function(positions[:, None], positions[None, :])                          # (T, T)
        allowed = band[None, None, :, :] & attention_mask.bool()[:, None, None, :]                 # (B, 1, T, T)
        bias = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
        scores = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5 + bias                 # (B, H, T, T)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, -1)                            # (B, T, H*d)
        return self.o_proj(out)


def build(bug="", B=2, T=8, D=32, H=4):
    torch.manual_seed(0)
    lengths = T - torch.tensor([0, 2, 1, 3][:B])                                                # frames per row
    attention_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()                      # (B, T)
    return MoonshineStreamingEncoderAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
