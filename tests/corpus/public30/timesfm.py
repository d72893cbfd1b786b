"""google-research/timesfm, src/timesfm/pytorch_patched_decoder.py (v1.2, ``TimesFMAttention``,
``PerDimScale``, ``TimesFMDecoderLayer``, ``convert_paddings_to_mask``, ``causal_mask``): the patched decoder of a
time-series foundation model. The series is cut into patches ``(B, T, P)`` (``T`` patches of length ``P``), a
residual MLP embeds each patch into ``D``; then a decoder layer: RMSNorm, a fused ``qkv_proj`` split in three,
``view(B, T, H, d)``, the query scaled per feature by ``PerDimScale`` (``1.442695 / sqrt(d) * softplus(w)``),
``permute(0, 2, 1, 3)``, ``q @ k.transpose(2, 3)`` plus the causal mask ``(1, 1, T, T)`` (a large negative above
the diagonal) combined with the padding mask by ``minimum``, ``softmax(dim=-1)``, ``@ v``, ``transpose(1, 2)
.reshape(B, T, D)``, ``o_proj``.

Bugs (natural slips): ``causal-mask-tril``: the mask built with ``torch.tril`` where ``triu(diagonal=1)`` is meant
(each patch sees only the future: the mask's direction reversed); ``scale-on-keys-axis``: ``PerDimScale`` applied
after the ``permute`` with its ``(d,)`` weights broadcast by a ``view(1, 1, -1, 1)`` (the per-feature scale laid
along the patch axis: only fits when ``T == d``, so it is written ``[:T]``, a scale per patch)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class ResidualBlock(nn.Module):
    def __init__(self, input_dims, hidden_dims, output_dims):
        super().__init__()
        self.hidden_layer = nn.Sequential(nn.Linear(input_dims, hidden_dims), nn.SiLU())
        self.output_layer = nn.Linear(hidden_dims, output_dims)
        self.residual_layer = nn.Linear(input_dims, output_dims)

    def forward(self, x):
        return self.output_layer(self.hidden_layer(x)) + self.residual_layer(x)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * (1.0 + self.weight)


class PerDimScale(nn.Module):
    def __init__(self, num_dims):
        super().__init__()
        self.num_dims = num_dims
        self.per_dim_scale = nn.Parameter(torch.randn(num_dims) * 0.1)

    def forward(self, x):
        r_softplus_0 = 1.442695041
        scale = r_softplus_0 / math.sqrt(self.num_dims)
        return x * (scale * F.softplus(self.per_dim_scale))


class TimesFMAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = num_heads, hidden_size // num_heads, bug
        self.qkv_proj = nn.Linear(hidden_size, 3 * hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)
        self.scaling = PerDimScale(self.head_dim)

    def forward(self, hidden_states, mask):
        batch_size, input_len, _ = hidden_states.shape
        qkv = self.qkv_proj(hidden_states)
        xq, xk, xv = qkv.split([self.num_heads * self.head_dim] * 3, dim=-1)
        xq = xq.view(batch_size, -1, self.num_heads, self.head_dim)
        xk = xk.view(batch_size, -1, self.num_heads, self.head_dim)
        xv = xv.view(batch_size, -1, self.num_heads, self.head_dim)
        if self.bug != "scale-on-keys-axis":
            xq = self.scaling(xq)
        q = xq.permute(0, 2, 1, 3)                                           # (B, H, T, d)
        k = xk.permute(0, 2, 1, 3)
        v = xv.permute(0, 2, 1, 3)
        if self.bug == "scale-on-keys-axis":
            w = F.softplus(self.scaling.per_dim_scale)[:input_len]
            q = q * (1.442695041 / math.sqrt(self.head_dim) * w.view(1, 1, -1, 1))
        scores = torch.matmul(q, k.transpose(2, 3))                          # (B, H, T, T)
        scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(q)
        output = torch.matmul(scores, v)                                     # (B, H, T, d)
        output = output.transpose(1, 2).contiguous().view(batch_size, input_len, -1)
        return self.o_proj(output)


def causal_mask(input_t, bug=""):
    length = input_t.shape[-2]
    ones = torch.ones((length, length), dtype=input_t.dtype)
    if bug == "causal-mask-tril":
        future = torch.tril(ones, diagonal=-1)
    else:
        future = torch.triu(ones, diagonal=1)
    return (future * -2.3819763e38)[None, None, :, :]


def convert_paddings_to_mask(paddings, dtype=torch.float32):
    attention_mask = paddings.detach().clone()
    attention_mask = attention_mask[:, None, None, :]                        # (B, 1, 1, T)
    return attention_mask * torch.finfo(dtype).min


class TimesFMDecoderLayer(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.self_attn = TimesFMAttention(dim, heads, bug)
        self.input_layernorm = RMSNorm(dim)
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def forward(self, hidden_states, mask):
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.input_layernorm(hidden_states), mask)
        return hidden_states + self.mlp(hidden_states)


class PatchedTimeSeriesDecoder(nn.Module):
    def __init__(self, dim, heads, patch_len, bug=""):
        super().__init__()
        self.bug, self.patch_len = bug, patch_len
        self.input_ff_layer = ResidualBlock(2 * patch_len, dim, dim)
        self.layer = TimesFMDecoderLayer(dim, heads, bug)

    def forward(self, input_ts, input_padding):
        bsize = input_ts.shape[0]
        patched_inputs = input_ts.view(bsize, -1, self.patch_len)             # (B, T, P)
        patched_pads = input_padding.view(bsize, -1, self.patch_len)
        concat_inputs = torch.cat([patched_inputs, patched_pads], dim=-1)     # (B, T, 2P)
        model_input = self.input_ff_layer(concat_inputs)                      # (B, T, D)
        patch_padding = torch.min(patched_pads, dim=-1)[0]                    # (B, T)
        mask = torch.minimum(convert_paddings_to_mask(patch_padding), causal_mask(model_input, self.bug))
        return self.layer(model_input, mask)


BUGS = ("causal-mask-tril", "scale-on-keys-axis")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    patch_len = 4
    input_ts = torch.randn(B, T * patch_len)
    input_padding = torch.zeros(B, T * patch_len)
    input_padding[0, :patch_len] = 1.0                                        # the first patch of series 0 padded
    return PatchedTimeSeriesDecoder(D, H, patch_len, bug).eval(), (input_ts, input_padding)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
