"""vllm-project/vllm pull request #47217 ("[Bugfix][Gemma4] Keep image bidirectional attention within the sliding
window", merged; "Root cause: ``GPUModelRunner`` dropped the *entire* bidirectional ``mm_prefix`` range for an
image when ``(range_len > sliding_window)``, leaving those image tokens fully causal in the LM. Intended
behavior ...: on local/sliding layers the bidirectional block is **clamped to** the sliding window --
``(causal OR blockwise) AND sliding_window`` -- not dropped"): an image longer than the sliding window lost its
bidirectional block altogether on the sliding layers.

The idiom: Gemma4's sliding-window text attention over a prompt with one image (``q_proj``/``k_proj``/
``v_proj``/``o_proj`` without bias, ``q_norm``/``k_norm`` RMSNorm per head, heads by ``view``/``transpose``,
``scaling = query_pre_attn_scalar ** -0.5``), the runner's ``mm_prefix_range`` ``(start, end)`` per request
turned into a boolean mask ``[B, 1, T, T]``: ``(causal | same_image) & in_window``, applied by
``masked_fill(~mask, finfo.min)`` before the softmax.

Bug (mask range): ``long-image-dropped``: a range longer than ``sliding_window`` is dropped (the image tokens
causal only): ``causal & in_window``."""

import sys

import torch
from torch import nn

BUGS = ("long-image-dropped",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.zeros(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


def sliding_mm_mask(seq_len, mm_prefix_range, sliding_window, bug=""):
    """The runner's mask for one request: causal within the window, each image bidirectional."""
    q_idx = torch.arange(seq_len)[:, None]
    kv_idx = torch.arange(seq_len)[None, :]
    causal = kv_idx <= q_idx
    in_window = (q_idx - kv_idx).abs() < sliding_window
    same_image = torch.zeros(seq_len, seq_len, dtype=torch.bool)
    for start, end in mm_prefix_range:
        if bug == "long-image-dropped" and end - start > sliding_window:
            continue
        inside = (torch.arange(seq_len) >= start) & (torch.arange(seq_len) < end)
        same_image = same_image | (inside[:, None] & inside[None, :])
    return (causal | same_image) & in_window


class Gemma4SlidingAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, sliding_window=3, bug=""):
        super().__init__()
        self.bug, self.sliding_window = bug, sliding_window
        self.num_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.q_norm, self.k_norm = RMSNorm(self.head_dim), RMSNorm(self.head_dim)

    def forward(self, hidden_states, mm_prefix_ranges):
        bsz, q_len, _ = hidden_states.shape
        shape = (bsz, q_len, self.num_heads, self.head_dim)
        q = self.q_norm(self.q_proj(hidden_states).view(shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(shape)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        mask = torch.stack([sliding_mm_mask(q_len, r, self.sliding_window, self.bug) for r in mm_prefix_ranges])
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        scores = scores.masked_fill(~mask[:, None], torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    ranges = [[(1, min(5, T))]] + [[(0, min(4, T))]] * (B - 1)     # one image of four soft tokens per prompt
    return Gemma4SlidingAttention(D, H, sliding_window=3, bug=bug).eval(), (torch.randn(B, T, D), ranges)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
