"""Project-MONAI/GenerativeModels issue #146 ("Missing scale in CrossAttention class", label bug, closed): in
``generative/networks/nets/diffusion_model_unet.py`` the ``CrossAttention`` used by the latent diffusion UNet's
``SpatialTransformer`` took the softmax of ``query @ key^T`` without multiplying by ``self.scale = 1 /
sqrt(num_head_channels)`` ("The attention mechanism in the cross-attention class is missing the multiplication by
the scale factor"). The fix computes the scores with the scale, ``torch.baddbmm(empty, query, key.transpose(-1,
-2), beta=0, alpha=self.scale)``.

The idiom (``CrossAttention`` inside ``BasicTransformerBlock``: self-attention, then cross-attention to the
conditioning ``context``, then a GEGLU feed-forward; pre-norm residuals): ``to_q``/``to_k``/``to_v`` without bias,
``reshape_heads_to_batch_dim`` (``reshape(b, l, heads, dim // heads).permute(0, 2, 1, 3).reshape(b * heads, l,
dim // heads)``), ``_attention`` (``baddbmm`` scores, ``softmax(dim=-1)``, ``bmm`` with the values),
``reshape_batch_dim_to_heads`` (the inverse), ``to_out``. The tokens ``(B, T, D)`` stand for the flattened latent
that ``SpatialTransformer``'s ``proj_in`` hands the block; ``context`` is ``(B, S, D)``.

Bugs: ``no-scale``: the scores unscaled (issue #146); ``batch-to-heads-no-permute``: ``reshape_batch_dim_to_heads``
reshapes ``(b*heads, l, d)`` straight to ``(b, l, d*heads)`` without ``permute(0, 2, 1, 3)``."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("no-scale", "batch-to-heads-no-permute")
TWINS = ()
DIMS = ("B=2 T=6 S=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 S=4 D=32 H=4"}


class CrossAttention(nn.Module):
    def __init__(self, query_dim, cross_attention_dim=None, num_attention_heads=8, num_head_channels=64, bug=""):
        super().__init__()
        self.bug = bug
        inner_dim = num_head_channels * num_attention_heads
        cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.scale = 1 / math.sqrt(num_head_channels)
        self.num_heads = num_attention_heads
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(cross_attention_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(cross_attention_dim, inner_dim, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(0.0))

    def reshape_heads_to_batch_dim(self, x):
        batch_size, seq_len, dim = x.shape
        x = x.reshape(batch_size, seq_len, self.num_heads, dim // self.num_heads)                 # (b, l, h, d)
        return x.permute(0, 2, 1, 3).reshape(batch_size * self.num_heads, seq_len, dim // self.num_heads)  # (b*h, l, d)

    def reshape_batch_dim_to_heads(self, x):
        batch_size, seq_len, dim = x.shape
        if self.bug == "batch-to-heads-no-permute":
            return x.reshape(batch_size // self.num_heads, seq_len, dim * self.num_heads)         # (b, l, h*d)
        x = x.reshape(batch_size // self.num_heads, self.num_heads, seq_len, dim)                 # (b, h, l, d)
        return x.permute(0, 2, 1, 3).reshape(batch_size // self.num_heads, seq_len, dim * self.num_heads)  # (b, l, h*d)

    def _attention(self, query, key, value):
        if self.bug == "no-scale":
            attention_scores = torch.matmul(query, key.transpose(-1, -2))                         # (b*h, l, s)
        else:
            attention_scores = torch.baddbmm(
                torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype, device=query.device),
                query, key.transpose(-1, -2), beta=0, alpha=self.scale)                           # (b*h, l, s)
        attention_probs = attention_scores.softmax(dim=-1)
        return torch.bmm(attention_probs, value)                                                  # (b*h, l, d)

    def forward(self, x, context=None):
        query = self.to_q(x)
        context = context if context is not None else x
        key, value = self.to_k(context), self.to_v(context)
        query = self.reshape_heads_to_batch_dim(query)
        key = self.reshape_heads_to_batch_dim(key)
        value = self.reshape_heads_to_batch_dim(value)
        x = self._attention(query, key, value)
        x = self.reshape_batch_dim_to_heads(x)                                                    # (b, l, inner)
        return self.to_out(x)


class GEGLU(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2)

    def forward(self, x):
        x, gate = self.proj(x).chunk(2, dim=-1)
        return x * F.gelu(gate)


class BasicTransformerBlock(nn.Module):
    def __init__(self, num_channels, num_attention_heads, num_head_channels, cross_attention_dim=None, bug=""):
        super().__init__()
        self.attn1 = CrossAttention(num_channels, None, num_attention_heads, num_head_channels, bug=bug)
        self.attn2 = CrossAttention(num_channels, cross_attention_dim, num_attention_heads, num_head_channels, bug=bug)
        self.ff = nn.Sequential(GEGLU(num_channels, 4 * num_channels), nn.Linear(4 * num_channels, num_channels))
        self.norm1, self.norm2 = nn.LayerNorm(num_channels), nn.LayerNorm(num_channels)
        self.norm3 = nn.LayerNorm(num_channels)

    def forward(self, x, context=None):
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context=context) + x
        return self.ff(self.norm3(x)) + x


def build(bug="", B=2, T=6, S=5, D=32, H=4):  # noqa: N803
    torch.manual_seed(0)
    model = BasicTransformerBlock(D, H, D // H, cross_attention_dim=D, bug=bug)
    return model.eval(), (torch.randn(B, T, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
