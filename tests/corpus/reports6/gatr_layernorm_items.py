"""Qualcomm-AI-research/geometric-algebra-transformer PR #8 ("Fix layernorm bug in baseline transformer"):
"The ``normalized_shape`` parameter in ``torch.nn.functional.layer_norm`` specifies the dimensions to
normalize, counting from the last dimension of the tensor. Currently, the implementation mistakenly uses all
dimensions except the first one, when it should only include the last dimension." GATr's baseline
``BaselineLayerNorm`` normalised ``(batch, items, channels)`` over ``inputs.shape[1:]``: every item's
channels scaled by statistics of the whole set, each token's normalised features depending on every other
token. The fix: ``normalized_shape=inputs.shape[-1:]``.

GATr's baseline idiom: ``BaselineTransformerBlock`` (pre-norm: ``norm``, ``BaselineSelfAttention``, residual,
``norm``, MLP, residual), ``QKVLinear`` one ``Linear`` to ``3 · hidden_channels · num_heads`` split by
``rearrange(qkv, "... items (qkv hidden_channels num_heads) -> qkv ... num_heads items hidden_channels")``,
``scaled_dot_product_attention``, ``rearrange(h, "... n_heads n_items hidden_channels -> ... n_items (n_heads
hidden_channels)")``, ``out_linear``.

Bug (argument): ``norm-over-items``."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

BUGS = ("norm-over-items",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BaselineLayerNorm(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.bug = bug

    def forward(self, inputs):
        shape = inputs.shape[1:] if self.bug == "norm-over-items" else inputs.shape[-1:]
        return F.layer_norm(inputs, normalized_shape=shape)                    # [norm]


class QKVLinear(nn.Module):
    def __init__(self, in_channels, hidden_channels, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.linear = nn.Linear(in_channels, 3 * hidden_channels * num_heads)

    def forward(self, inputs):
        qkv = self.linear(inputs)                                                # (B, T, 3·D)
        q, k, v = rearrange(qkv, "... items (qkv hidden_channels num_heads) -> qkv ... num_heads items hidden_channels",
                            num_heads=self.num_heads, qkv=3)                     # (B, H, T, d)
        return q, k, v


class BaselineSelfAttention(nn.Module):
    def __init__(self, in_channels, out_channels, hidden_channels, num_heads):
        super().__init__()
        self.qkv_linear = QKVLinear(in_channels, hidden_channels, num_heads)
        self.out_linear = nn.Linear(hidden_channels * num_heads, out_channels)

    def forward(self, inputs):
        q, k, v = self.qkv_linear(inputs)
        h = F.scaled_dot_product_attention(q, k, v)                              # (B, H, T, d)
        h = rearrange(h, "... n_heads n_items hidden_channels -> ... n_items (n_heads hidden_channels)")
        return self.out_linear(h)                                                # (B, T, D)


class BaselineTransformerBlock(nn.Module):
    def __init__(self, channels, num_heads, bug=""):
        super().__init__()
        self.norm = BaselineLayerNorm(bug)
        self.attention = BaselineSelfAttention(channels, channels, channels // num_heads, num_heads)
        self.mlp = nn.Sequential(nn.Linear(channels, 2 * channels), nn.GELU(), nn.Linear(2 * channels, channels))

    def forward(self, inputs):
        h = self.norm(inputs)
        outputs = inputs + self.attention(h)
        h = self.norm(outputs)
        return outputs + self.mlp(h)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return BaselineTransformerBlock(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
