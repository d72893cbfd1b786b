"""tenstorrent/tt-metal pull request #56789 ("[Bug fix] Scale CLIP attention by 1/sqrt(head_dim), not
1/sqrt(num_heads)", merged): the CLIP zero-shot classification tutorial's ``MultiHeadAttention`` scaled the
scores by ``1/sqrt(num_heads)`` although its own comment said ``1/sqrt(head_dim)`` (for ViT-B/32's vision
tower 1/sqrt(12) = 0.289 against 1/8 = 0.125); the fix reads ``head_dim`` from ``q_proj.weight``.

The idiom (the tutorial's CLIP encoder layer, written here in torch): ``layer_norm1`` before the attention,
``q_proj``/``k_proj``/``v_proj``/``out_proj``, heads split with ``reshape(batch, seq, num_heads, head_dim)``
and ``permute(0, 2, 1, 3)``, scores ``q @ k^T * scale``, ``softmax(dim=-1)``, heads merged back and projected,
the residual, then ``layer_norm2`` and the quick-GELU MLP (``x * sigmoid(1.702 x)``) with its residual. The
vision tower has no mask.

Bug (scale): ``scale-by-heads``."""

import sys

import torch
from torch import nn

BUGS = ("scale-by-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MultiHeadAttention(nn.Module):
    def __init__(self, hidden, num_heads, bug=""):
        super().__init__()
        self.bug, self.num_heads = bug, num_heads
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states):
        batch, seq, hidden = hidden_states.shape
        head_dim = self.q_proj.weight.shape[0] // self.num_heads
        # scale = 1 / sqrt(head_dim)
        scale = (self.num_heads if self.bug == "scale-by-heads" else head_dim) ** -0.5
        q = self.q_proj(hidden_states).reshape(batch, seq, self.num_heads, head_dim).permute(0, 2, 1, 3)
        k = self.k_proj(hidden_states).reshape(batch, seq, self.num_heads, head_dim).permute(0, 2, 1, 3)
        v = self.v_proj(hidden_states).reshape(batch, seq, self.num_heads, head_dim).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(batch, seq, hidden)
        return self.out_proj(out)


class CLIPEncoderLayer(nn.Module):
    def __init__(self, hidden, num_heads, bug=""):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(hidden)
        self.self_attn = MultiHeadAttention(hidden, num_heads, bug=bug)
        self.layer_norm2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.self_attn(self.layer_norm1(hidden_states))
        h = self.fc1(self.layer_norm2(hidden_states))
        return hidden_states + self.fc2(h * torch.sigmoid(1.702 * h))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return CLIPEncoderLayer(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
