"""huggingface/diffusers, src/diffusers/models/attention_processor.py (``SanaLinearAttnProcessor2_0``) and
src/diffusers/models/transformers/sana_transformer.py (``SanaTransformerBlock``, ``GLUMBConv``), v0.32: Sana's
ReLU linear attention over image tokens: ``to_q``/``to_k``/``to_v`` on ``(B, N, C)``; ``query.transpose(1,
2).unflatten(1, (heads, -1))`` (``(B, H, d, N)``), the key the same then ``transpose(2, 3)`` (``(B, H, N, d)``),
the value as the query; ``relu`` on q and k; ``F.pad(value, (0, 0, 0, 1), value=1.0)`` (a row of ones under the
value's features: the normaliser rides along); ``scores = value @ key`` (``(B, H, d+1, d)``), ``hidden =
scores @ query`` (``(B, H, d+1, N)``), ``hidden[:, :, :-1] / (hidden[:, :, -1:] + 1e-15)``, ``flatten(1,
2).transpose(1, 2)``, ``to_out``. The block: the latent ``(B, C, Hp, Wp)`` as tokens ``flatten(2).transpose(1,
2)``, adaLN ``scale_shift_table[None] + timestep.reshape(B, 6, -1)``, the attention, then ``GLUMBConv`` on the
tokens as an image again: ``unflatten(1, (height, width)).permute(0, 3, 1, 2)``, 1×1 conv to 2·hidden, depthwise
3×3, ``chunk(2, dim=1)`` GLU, 1×1 conv, ``flatten(2).permute(0, 2, 1)``.

Bugs: ``output-fold-no-transpose``: the heads folded back by ``hidden.reshape(B, N, -1)`` from ``(B, H, d, N)``
(features and tokens mixed; the slip of reading the processor's ``(B, H, d, N)`` as the usual ``(B, H, N, d)``);
``ffn-unflatten-no-permute``: the tokens turned into an image by ``reshape(B, C, height, width)`` in place of
``unflatten(1, (height, width)).permute(0, 3, 1, 2)`` (channels and positions mixed before the convolutions).
Twin: ``ones-row-first``: the row of ones padded on top (``F.pad(value, (0, 0, 1, 0))``) and the normaliser read
from row 0 (``hidden[:, :, 1:] / hidden[:, :, :1]``): the same attention."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, hidden_states):
        B, N, _ = hidden_states.shape
        query = self.to_q(hidden_states)
        key = self.to_k(hidden_states)
        value = self.to_v(hidden_states)
        query = query.transpose(1, 2).unflatten(1, (self.heads, -1))                   # (B, H, d_k, N)
        key = key.transpose(1, 2).unflatten(1, (self.heads, -1)).transpose(2, 3)       # (B, H, N, d_k)
        value = value.transpose(1, 2).unflatten(1, (self.heads, -1))                   # (B, H, d_k, N)
        query = F.relu(query)
        key = F.relu(key)
        query, key, value = query.float(), key.float(), value.float()
        if self.bug == "ones-row-first":
            value = F.pad(value, (0, 0, 1, 0), mode="constant", value=1.0)            # (B, H, d_k+1, N)
        else:
            value = F.pad(value, (0, 0, 0, 1), mode="constant", value=1.0)            # (B, H, d_k+1, N)
        scores = torch.matmul(value, key)                                              # (B, H, d_k+1, d_k)
        hidden_states = torch.matmul(scores, query)                                    # (B, H, d_k+1, N)
        if self.bug == "ones-row-first":
            hidden_states = hidden_states[:, :, 1:] / (hidden_states[:, :, :1] + 1e-15)  # (B, H, d_k, N)
        else:
            hidden_states = hidden_states[:, :, :-1] / (hidden_states[:, :, -1:] + 1e-15)  # (B, H, d_k, N)
        if self.bug == "output-fold-no-transpose":
            hidden_states = hidden_states.reshape(B, N, -1)                            # (B, N, D)
        else:
            hidden_states = hidden_states.flatten(1, 2).transpose(1, 2)                # (B, N, D)
        return self.to_out(hidden_states)


class GLUMBConv(nn.Module):
    def __init__(self, in_channels, hidden_channels, bug=""):
        super().__init__()
        self.bug = bug
        self.conv_inverted = nn.Conv2d(in_channels, hidden_channels * 2, 1)
        self.conv_depth = nn.Conv2d(hidden_channels * 2, hidden_channels * 2, 3, padding=1,
                                    groups=hidden_channels * 2)
        self.conv_point = nn.Conv2d(hidden_channels, in_channels, 1, bias=False)

    def forward(self, hidden_states, height, width):
        B, N, C = hidden_states.shape
        if self.bug == "ffn-unflatten-no-permute":
            hidden_states = hidden_states.reshape(B, C, height, width)                 # (B, D, Hp, Wp)
        else:
            hidden_states = hidden_states.unflatten(1, (height, width)).permute(0, 3, 1, 2)  # (B, D, Hp, Wp)
        hidden_states = F.silu(self.conv_inverted(hidden_states))
        hidden_states = self.conv_depth(hidden_states)
        hidden_states, gate = torch.chunk(hidden_states, 2, dim=1)
        hidden_states = self.conv_point(hidden_states * F.silu(gate))                 # (B, D, Hp, Wp)
        return hidden_states.flatten(2).permute(0, 2, 1)                              # (B, Hp*Wp, D)


class SanaTransformerBlock(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn1 = Attention(dim, heads, bug)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = GLUMBConv(dim, int(dim * 2.5), bug)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)

    def forward(self, hidden_states, timestep, height, width):
        B = hidden_states.shape[0]
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + timestep.reshape(B, 6, -1)).chunk(6, dim=1)  # (B, 1, D) each
        norm_hidden_states = self.norm1(hidden_states) * (1 + scale_msa) + shift_msa
        hidden_states = hidden_states + gate_msa * self.attn1(norm_hidden_states)
        norm_hidden_states = self.norm2(hidden_states) * (1 + scale_mlp) + shift_mlp
        return hidden_states + gate_mlp * self.ff(norm_hidden_states, height, width)


class Sana(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.patch_embed = nn.Conv2d(4, dim, kernel_size=1)
        self.time_proj = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.block = SanaTransformerBlock(dim, heads, bug)
        self.proj_out = nn.Linear(dim, 4)

    def forward(self, latent, temb):
        B, _, height, width = latent.shape
        hidden_states = self.patch_embed(latent).flatten(2).transpose(1, 2)            # (B, Hp*Wp, D)
        hidden_states = self.block(hidden_states, self.time_proj(temb), height, width)
        out = self.proj_out(hidden_states)                                             # (B, Hp*Wp, 4)
        return out.unflatten(1, (height, width)).permute(0, 3, 1, 2)                   # (B, 4, Hp, Wp)


BUGS = ("output-fold-no-transpose", "ffn-unflatten-no-permute")
TWINS = ("ones-row-first",)
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)
EQUAL = {"B=2 D=32 H=4 Hp=3 Wp=5": "B=4 D=32 H=4 Hp=2 Wp=2"}


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    """A latent of ``Hp × Wp`` positions with 4 channels, patch size 1 (Sana's); the timestep already embedded
    to width ``D``."""
    torch.manual_seed(0)
    model = Sana(D, H, bug).eval()
    return model, (torch.randn(B, 4, Hp, Wp), torch.randn(B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
