"""Blaizzy/mlx-vlm issue #1737 ("Qwen2.5-VL: any prompt longer than ``prefill_step_size`` (default 2048)
degenerates -- empty output or ``<|im_start|>`` repetition"), fixed by pull request #1741 ("Fix chunked MRoPE
positions across Qwen VL models", merged; root cause: "plain generation passed full-prompt ``position_ids`` to
every chunked-prefill call. Affected Qwen multimodal language models applied the prompt's initial positions to
later chunks"; the fix: "slice full-prompt MRoPE position IDs to each model's current prefill window"): a prompt
prefilled in chunks rotates every chunk after the first at the prompt's first positions, while its keys are
appended after the cache's.

The idiom: the Qwen2-VL language attention as mlx-vlm ports it (``q_proj``/``k_proj``/``v_proj`` with bias,
``o_proj`` without, heads split by ``reshape``/``transpose``), the multimodal rotary embedding: ``position_ids``
``[3, B, S]`` (temporal, height, width rows for the whole prompt), ``inv_freq`` per pair, ``cos``/``sin`` split
by ``mrope_section`` (twice, one half each) and each section taken from its row, ``rotate_half``; the chunk's
keys and values concatenated after the cache (``offset`` = the cache's length), a causal mask shifted by the
offset, scores scaled by ``1/sqrt(head_dim)``.

Bug (positions): ``prompt-start-positions``: the chunk takes ``position_ids[..., :L]`` (the prompt's first ``L``
positions) rather than ``position_ids[..., offset:offset + L]``."""

import math
import sys

import torch
from torch import nn

BUGS = ("prompt-start-positions",)
TWINS = ()
DIMS = ("B=2 T=4 D=32 H=4 S=10",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4 S=8"}


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_multimodal_rotary_pos_emb(q, k, cos, sin, mrope_section):
    """cos/sin ``[3, B, L, head_dim]``: each section of the rotary width from its own position row."""
    sections = mrope_section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(sections, dim=-1))], dim=-1).unsqueeze(1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(sections, dim=-1))], dim=-1).unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Qwen2VLAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug="", rope_theta=10000.0):
        super().__init__()
        self.bug = bug
        self.n_heads, self.head_dim = num_heads, hidden_size // num_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        half = self.head_dim // 2
        self.mrope_section = [half - 2 * (half // 4), half // 4, half // 4]
        self.register_buffer("inv_freq", 1.0 / rope_theta ** (torch.arange(0, self.head_dim, 2).float()
                                                               / self.head_dim))

    def rotary(self, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq                         # (3, B, L, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, x, position_ids, k_cache, v_cache):
        B, L, _ = x.shape
        offset = k_cache.shape[2]
        if self.bug == "prompt-start-positions":
            position_ids = position_ids[..., :L]
        else:
            position_ids = position_ids[..., offset:offset + L]
        q = self.q_proj(x).reshape(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).reshape(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).reshape(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(position_ids)
        q, k = apply_multimodal_rotary_pos_emb(q, k, cos, sin, self.mrope_section)
        k = torch.cat([k_cache, k], dim=2)                                              # (B, H, offset+L, d)
        v = torch.cat([v_cache, v], dim=2)
        q_pos = torch.arange(offset, offset + L)[:, None]
        k_pos = torch.arange(offset + L)[None, :]
        mask = torch.zeros(L, offset + L).masked_fill(k_pos > q_pos, float("-inf"))
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale + mask
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, L, -1)
        return self.o_proj(out)


def build(bug="", B=2, T=4, D=32, H=4, S=10):
    torch.manual_seed(0)
    d = D // H
    past = S - T                                       # the earlier chunks' length, already in the cache
    t = torch.arange(S)
    image = (t >= 1) & (t < 5)                        # an image of 2 x 2 patches at tokens 1..4, text around it
    position_ids = torch.stack([torch.where(image, 1, t), torch.where(image, 1 + (t - 1) // 2, t),
                                torch.where(image, 1 + (t - 1) % 2, t)])[:, None, :].expand(3, B, S)
    inputs = (torch.randn(B, T, D), position_ids, torch.randn(B, H, past, d), torch.randn(B, H, past, d))
    return Qwen2VLAttention(D, H, bug=bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
