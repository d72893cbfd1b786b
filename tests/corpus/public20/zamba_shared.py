"""Zyphra/transformers_zamba2 and huggingface/transformers, models/zamba2/modeling_zamba2.py
(``Zamba2AttentionDecoderLayer``, ``Zamba2HybridLayer``, 4.48): one *shared* attention block reused at several
depths among the Mamba layers; its input is ``torch.concatenate([hidden_states, original_hidden_states],
dim=-1)`` ``(B, T, 2·D)`` (the layer's stream joined with the embeddings), ``q_proj, k_proj, v_proj`` from
``2·D`` each with a per-depth LoRA adapter (``linear_q_adapter_list[adapter_idx]``: ``Linear(2D, r) ->
Linear(r, D)`` added), ``view(B, T, -1, head_dim).transpose(1, 2)``, causal ``scaled_dot_product_attention``
with ``scale = (head_dim / 2) ** -0.5`` (Zamba's attention is built at twice the model width), ``o_proj``,
then a per-depth ``linear`` back into the stream. (The Mamba layers between are stood in for by a linear.)

Bugs (argument): ``adapter-of-first-depth``: every depth reads ``linear_q_adapter_list[0]`` (the adapter index
not passed through: a natural slip); ``concat-along-tokens``: ``torch.concatenate([...], dim=1)`` and a
``view(B, T, 2 * D)`` to make the width fit again (the tokens of the two streams interleaved into features)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Zamba2Attention(nn.Module):
    def __init__(self, hidden_size, num_heads, num_depths, rank=4):
        super().__init__()
        self.num_heads = num_heads
        self.attn_width = 2 * hidden_size
        self.head_dim = self.attn_width // num_heads
        self.scale = (self.head_dim / 2) ** -0.5
        self.q_proj = nn.Linear(self.attn_width, self.attn_width, bias=False)
        self.k_proj = nn.Linear(self.attn_width, self.attn_width, bias=False)
        self.v_proj = nn.Linear(self.attn_width, self.attn_width, bias=False)
        self.o_proj = nn.Linear(self.attn_width, hidden_size, bias=False)
        self.linear_q_adapter_list = nn.ModuleList(
            nn.Sequential(nn.Linear(self.attn_width, rank, bias=False), nn.Linear(rank, self.attn_width, bias=False))
            for _ in range(num_depths))

    def forward(self, hidden_states, adapter_idx):                                 # (B, T, 2D)
        B, T, _ = hidden_states.shape
        q = self.q_proj(hidden_states) + self.linear_q_adapter_list[adapter_idx](hidden_states)
        k, v = self.k_proj(hidden_states), self.v_proj(hidden_states)
        q, k, v = (t.view(B, T, -1, self.head_dim).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.attn_width))


class Zamba2Model(nn.Module):
    def __init__(self, hidden_size, num_heads, num_depths=2, bug=""):
        super().__init__()
        self.bug = bug
        self.shared = Zamba2Attention(hidden_size, num_heads, num_depths)
        self.linears = nn.ModuleList(nn.Linear(hidden_size, hidden_size, bias=False) for _ in range(num_depths))
        self.mambas = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_depths))

    def forward(self, embeds):                                                     # (B, T, D)
        B, T, D = embeds.shape
        hidden = embeds
        for depth, (linear, mamba) in enumerate(zip(self.linears, self.mambas)):
            if self.bug == "concat-along-tokens":
                joined = torch.concatenate([hidden, embeds], dim=1).view(B, T, 2 * D)
            else:
                joined = torch.concatenate([hidden, embeds], dim=-1)
            idx = 0 if self.bug == "adapter-of-first-depth" else depth
            hidden = hidden + linear(self.shared(joined, idx))
            hidden = hidden + mamba(hidden)
        return hidden


BUGS = ("adapter-of-first-depth", "concat-along-tokens")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Zamba2Model(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
