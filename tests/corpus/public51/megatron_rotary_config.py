"""NVIDIA/Megatron-LM ``megatron/core/models/common/embeddings/rotary_pos_embedding.py`` and ``rope_utils.py`` (the
idiom): sequence-first activations ``[s, b, h, d]``; ``RotaryEmbedding(kv_channels, rotary_percent,
rotary_interleaved)`` building ``emb`` of shape ``[s, 1, 1, rot_dim]`` (``cat((freqs, freqs))`` for halves, each
frequency twice in a row, ``stack(...).view``, when interleaved); ``_apply_rotary_pos_emb_bshd(t, freqs,
rotary_interleaved)`` rotating ``t[..., :rot_dim]`` with ``_rotate_half(x, rotary_interleaved)`` and passing the
rest through; the layer reads its settings from ``self.config`` (a ``TransformerConfig``: ``num_attention_heads``,
``rotary_interleaved``), then causal attention per head on ``[b, h, s, d]``.

Bug (the class of vllm-project/vllm-ascend pull request #12820: a model's pairing flag ignored where the rotation
runs): ``config-ignored``: ``config.rotary_interleaved = True`` (a checkpoint trained interleaved), but the layer
builds its ``RotaryEmbedding`` and applies it with the defaults, ``rotary_interleaved=False``: table and rotation
both pair by halves. Twin: ``halves-config`` (the config says halves, and both follow it)."""

import sys
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TransformerConfig:
    hidden_size: int
    num_attention_heads: int
    rotary_interleaved: bool = False


BUGS = ("config-ignored",)
TWINS = ("halves-config",)
DIMS = ("B=2 T=6 D=64 H=4",)


def _rotate_half(x, rotary_interleaved):
    if not rotary_interleaved:
        x1, x2 = torch.chunk(x, 2, dim=-1)                                           # [s, b, h, d/2] each
        return torch.cat((-x2, x1), dim=-1)                                          # [s, b, h, d]
    x1, x2 = x[:, :, :, ::2], x[:, :, :, 1::2]                                       # [s, b, h, d/2] each
    x_new = torch.stack((-x2, x1), dim=-1)                                           # [s, b, h, d/2, 2]
    return x_new.view(x_new.shape[0], x_new.shape[1], x_new.shape[2], -1)           # [s, b, h, d]


def _apply_rotary_pos_emb_bshd(t, freqs, rotary_interleaved=False):
    rot_dim = freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]                                   # [s, b, h, rot_dim], rest
    cos_, sin_ = torch.cos(freqs).to(t.dtype), torch.sin(freqs).to(t.dtype)          # [s, 1, 1, rot_dim]
    t = (t * cos_) + (_rotate_half(t, rotary_interleaved) * sin_)
    return torch.cat((t, t_pass), dim=-1)                                            # [s, b, h, d]


class RotaryEmbedding(nn.Module):
    def __init__(self, kv_channels, rotary_percent=1.0, rotary_interleaved=False, rotary_base=10000):
        super().__init__()
        dim = int(kv_channels * rotary_percent)
        self.rotary_interleaved = rotary_interleaved
        self.inv_freq = 1.0 / rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)

    def forward(self, max_seq_len):
        seq = torch.arange(max_seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.outer(seq, self.inv_freq)                                      # [s, dim/2]
        if not self.rotary_interleaved:
            emb = torch.cat((freqs, freqs), dim=-1)                                  # [s, dim]
        else:
            emb = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1).view(freqs.shape[0], -1)   # [s, dim]
        return emb[:, None, None, :]                                                 # [s, 1, 1, dim]


class SelfAttention(nn.Module):
    def __init__(self, config, bug=""):
        super().__init__()
        self.config, self.bug = config, bug
        self.hn = config.hidden_size // config.num_attention_heads
        self.linear_qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.linear_proj = nn.Linear(config.hidden_size, config.hidden_size)
        interleaved = False if bug == "config-ignored" else config.rotary_interleaved
        self.rotary_pos_emb = RotaryEmbedding(self.hn, rotary_interleaved=interleaved)

    def forward(self, hidden_states):
        s, b, _ = hidden_states.shape
        heads = self.config.num_attention_heads
        mixed = self.linear_qkv(hidden_states).view(s, b, heads, 3 * self.hn)        # [s, b, h, 3hn]
        q, k, v = torch.split(mixed, self.hn, dim=3)                                 # [s, b, h, hn] each
        emb = self.rotary_pos_emb(s)
        interleaved = False if self.bug == "config-ignored" else self.config.rotary_interleaved
        q = _apply_rotary_pos_emb_bshd(q, emb, interleaved)                          # [s, b, h, hn]
        k = _apply_rotary_pos_emb_bshd(k, emb, interleaved)                          # [s, b, h, hn]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))                         # [b, h, s, hn] each
        scores = q @ k.transpose(-1, -2) / self.hn ** 0.5                            # [b, h, s, s]
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)                          # [s, s]
        probs = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        ctx = (probs @ v).permute(2, 0, 1, 3).reshape(s, b, -1)                      # [s, b, h·hn]
        return self.linear_proj(ctx)                                                 # [s, b, D]


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    config = TransformerConfig(D, H, rotary_interleaved=bug != "halves-config")
    return SelfAttention(config, bug).eval(), (torch.randn(T, B, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
