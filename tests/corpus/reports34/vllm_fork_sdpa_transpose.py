"""HabanaAI/vllm-fork pull request #1218 ("add missing transpose in MultiHeadAttention"): vLLM's
``MultiHeadAttention`` (the attention of the vision encoders: SigLIP, CLIP, InternViT) reshapes its projections to
``(batch, seq, heads, head_size)`` and must transpose them to ``(batch, heads, seq, head_size)`` before
``F.scaled_dot_product_attention``; commit 09332dc dropped the transposes on the fork's HPU path, so the attention
ran over the heads with the tokens as its batch of heads. The pull request puts ``transpose(1, 2)`` back on the
three inputs and on the output.

The idiom (a SigLIP encoder layer served by vLLM): ``layer_norm1``, ``q_proj``/``k_proj``/``v_proj``, the
``MultiHeadAttention`` (view to ``(B, T, H, d_k)``, transpose, SDPA with ``scale = head_size ** -0.5``,
transpose back, reshape to ``(B, T, D)``), ``out_proj`` and the residual, then ``layer_norm2`` and a
tanh-GELU MLP with its residual. The vision tower has no mask.

Bug (missing transpose): ``no-transpose``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-transpose",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, head_size, scale, bug=""):
        super().__init__()
        self.num_heads, self.head_size, self.scale, self.bug = num_heads, head_size, scale, bug

    def forward(self, query, key, value):
        bsz, q_len, _ = query.size()
        kv_len = key.size(1)
        query = query.view(bsz, q_len, self.num_heads, self.head_size)               # (B, T, H, d_k)
        key = key.view(bsz, kv_len, self.num_heads, self.head_size)                  # (B, T, H, d_k)
        value = value.view(bsz, kv_len, self.num_heads, self.head_size)              # (B, T, H, d_k)
        if self.bug != "no-transpose":
            query, key, value = (x.transpose(1, 2) for x in (query, key, value))     # (B, H, T, d_k)
        out = F.scaled_dot_product_attention(query, key, value, scale=self.scale)    # (B, H, T, d_k)
        if self.bug != "no-transpose":
            out = out.transpose(1, 2)                                                 # (B, T, H, d_k)
        return out.reshape(bsz, q_len, -1)                                            # (B, T, D)


class SiglipAttention(nn.Module):
    def __init__(self, hidden, num_heads, bug=""):
        super().__init__()
        head_dim = hidden // num_heads
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)
        self.attn = MultiHeadAttention(num_heads, head_dim, head_dim ** -0.5, bug=bug)

    def forward(self, hidden_states):
        q, k, v = self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states)
        return self.out_proj(self.attn(q, k, v))


class SiglipEncoderLayer(nn.Module):
    def __init__(self, hidden, num_heads, bug=""):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(hidden)
        self.self_attn = SiglipAttention(hidden, num_heads, bug=bug)
        self.layer_norm2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.self_attn(self.layer_norm1(hidden_states))
        h = F.gelu(self.fc1(self.layer_norm2(hidden_states)), approximate="tanh")
        return hidden_states + self.fc2(h)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return SiglipEncoderLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
