"""jaywalnut310/vits, attentions.py (``MultiHeadAttention`` with ``window_size``: ``attention``,
``_get_relative_embeddings``, ``_matmul_with_relative_keys``/``_values``, ``_relative_position_to_absolute_position``,
``_absolute_position_to_relative_position``; ``Encoder.forward``; ``LayerNorm``) with commons.py
(``convert_pad_shape``, ``sequence_mask``): the text encoder's self-attention with windowed relative position
embeddings (Shaw et al., as in Glow-TTS). Channels first ``[b, d, t]``, ``Conv1d`` projections, heads
``view(b, self.n_heads, self.k_channels, t_t).transpose(2, 3)``; ``emb_rel_k``/``emb_rel_v`` ``[1, 2w+1, d_k]``
(``heads_share``) padded by ``max(t - (w + 1), 0)`` each side and sliced from ``max((w + 1) - t, 0)`` to ``2t - 1``
rows; the key logits ``[b, h, t, 2t-1]`` moved to absolute positions by pad one column, flatten, pad ``t - 1``, view
``[t + 1, 2t - 1]``, keep ``[:t, t - 1:]``; ``masked_fill(mask == 0, -1e4)``, ``softmax(dim=-1)``; the weights
moved back to relative positions (pad ``t - 1`` columns, flatten, pad ``t`` in front, view ``[t, 2t]``, drop the
first column) for the value embeddings; the merge ``output.transpose(2, 3).contiguous().view(b, d, t_t)``. The
window is 2 here (VITS uses 4) so that both traced lengths exceed it.

Bugs: ``rel-table-pad-off-by-one``: ``pad_length = max(length - self.window_size, 0)`` (one row too many on each
side: the slice from 0 reads every relative position one step off, the centre row ``0`` lands on offset ``-1``);
``abs-to-rel-pad-right``: the flattened weights padded ``[0, length]`` instead of ``[length, 0]`` (no skew: the
relative row ``r`` of query ``i`` holds the weight of some other key); ``merge-no-transpose``:
``output.contiguous().view(b, d, t_t)`` (``[b, h, t, d_k]`` read as ``[b, d, t]``: tokens and channels mixed)."""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F


def convert_pad_shape(pad_shape):
    return [item for sublist in pad_shape[::-1] for item in sublist]


def sequence_mask(length, max_length=None):
    x = torch.arange(max_length, dtype=length.dtype, device=length.device)
    return x.unsqueeze(0) < length.unsqueeze(1)                                      # (b, t)


class LayerNorm(nn.Module):
    def __init__(self, channels, eps=1e-5):
        super().__init__()
        self.channels, self.eps = channels, eps
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        x = x.transpose(1, -1)                                                       # (b, t, d)
        x = F.layer_norm(x, (self.channels,), self.gamma, self.beta, self.eps)
        return x.transpose(1, -1)                                                    # (b, d, t)


class MultiHeadAttention(nn.Module):
    def __init__(self, channels, n_heads, window_size=2, bug=""):
        super().__init__()
        self.n_heads, self.window_size, self.bug = n_heads, window_size, bug
        self.k_channels = channels // n_heads
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        rel_stddev = self.k_channels ** -0.5
        self.emb_rel_k = nn.Parameter(torch.randn(1, window_size * 2 + 1, self.k_channels) * rel_stddev)
        self.emb_rel_v = nn.Parameter(torch.randn(1, window_size * 2 + 1, self.k_channels) * rel_stddev)

    def forward(self, x, c, attn_mask=None):
        q, k, v = self.conv_q(x), self.conv_k(c), self.conv_v(c)
        return self.conv_o(self.attention(q, k, v, mask=attn_mask))

    def attention(self, query, key, value, mask=None):
        # reshape [b, d, t] -> [b, n_h, t, d_k]
        b, d, t_s, t_t = (*key.size(), query.size(2))
        query = query.view(b, self.n_heads, self.k_channels, t_t).transpose(2, 3)   # (b, h, t_t, d_k)
        key = key.view(b, self.n_heads, self.k_channels, t_s).transpose(2, 3)       # (b, h, t_s, d_k)
        value = value.view(b, self.n_heads, self.k_channels, t_s).transpose(2, 3)   # (b, h, t_s, d_k)
        scores = torch.matmul(query / math.sqrt(self.k_channels), key.transpose(-2, -1))   # (b, h, t_t, t_s)
        key_relative_embeddings = self._get_relative_embeddings(self.emb_rel_k, t_s)
        rel_logits = torch.matmul(query / math.sqrt(self.k_channels),
                                  key_relative_embeddings.unsqueeze(0).transpose(-2, -1))   # (b, h, t, 2t-1)
        scores = scores + self._relative_position_to_absolute_position(rel_logits)
        scores = scores.masked_fill(mask == 0, -1e4)
        p_attn = F.softmax(scores, dim=-1)                                           # (b, h, t_t, t_s)
        output = torch.matmul(p_attn, value)                                         # (b, h, t_t, d_k)
        relative_weights = self._absolute_position_to_relative_position(p_attn)     # (b, h, t, 2t-1)
        value_relative_embeddings = self._get_relative_embeddings(self.emb_rel_v, t_s)
        output = output + torch.matmul(relative_weights, value_relative_embeddings.unsqueeze(0))
        if self.bug == "merge-no-transpose":
            return output.contiguous().view(b, d, t_t)
        return output.transpose(2, 3).contiguous().view(b, d, t_t)                   # (b, d, t_t)

    def _get_relative_embeddings(self, relative_embeddings, length):
        # Pad first before slice to avoid using cond ops.
        pad_length = max(length - (self.window_size + 1), 0)
        if self.bug == "rel-table-pad-off-by-one":
            pad_length = max(length - self.window_size, 0)
        slice_start_position = max((self.window_size + 1) - length, 0)
        slice_end_position = slice_start_position + 2 * length - 1
        padded = F.pad(relative_embeddings, convert_pad_shape([[0, 0], [pad_length, pad_length], [0, 0]]))
        return padded[:, slice_start_position:slice_end_position]                   # (1, 2t-1, d_k)

    def _relative_position_to_absolute_position(self, x):
        batch, heads, length, _ = x.size()                                           # (b, h, l, 2l-1)
        x = F.pad(x, convert_pad_shape([[0, 0], [0, 0], [0, 0], [0, 1]]))           # (b, h, l, 2l)
        x_flat = x.view([batch, heads, length * 2 * length])                         # (b, h, 2l·l)
        x_flat = F.pad(x_flat, convert_pad_shape([[0, 0], [0, 0], [0, length - 1]]))
        return x_flat.view([batch, heads, length + 1, 2 * length - 1])[:, :, :length, length - 1:]   # (b, h, l, l)

    def _absolute_position_to_relative_position(self, x):
        batch, heads, length, _ = x.size()                                           # (b, h, l, l)
        x = F.pad(x, convert_pad_shape([[0, 0], [0, 0], [0, 0], [0, length - 1]]))  # (b, h, l, 2l-1)
        x_flat = x.view([batch, heads, length ** 2 + length * (length - 1)])        # (b, h, l·(2l-1))
        skew = [0, length] if self.bug == "abs-to-rel-pad-right" else [length, 0]
        x_flat = F.pad(x_flat, convert_pad_shape([[0, 0], [0, 0], skew]))
        return x_flat.view([batch, heads, length, 2 * length])[:, :, :, 1:]         # (b, h, l, 2l-1)


class Encoder(nn.Module):
    def __init__(self, hidden_channels, n_heads, bug=""):
        super().__init__()
        self.attn_layer = MultiHeadAttention(hidden_channels, n_heads, bug=bug)
        self.norm_layer = LayerNorm(hidden_channels)

    def forward(self, x, x_lengths):
        x_mask = sequence_mask(x_lengths, x.size(2)).unsqueeze(1).to(x.dtype)       # (b, 1, t)
        attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1)                       # (b, 1, t, t)
        x = x * x_mask
        y = self.attn_layer(x, x, attn_mask)
        x = self.norm_layer(x + y)
        return x * x_mask


BUGS = ("rel-table-pad-off-by-one", "abs-to-rel-pad-right", "merge-no-transpose")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


def build(bug="", B=2, T=6, D=32, H=4):  # noqa: N803
    """Embedded phonemes ``[b, d, t]`` (``emb(x) * sqrt(d)``, transposed); the longest fills ``T``, the rest 2 less."""
    torch.manual_seed(0)
    x_lengths = torch.tensor([T] + [T - 2] * (B - 1))
    return Encoder(D, H, bug).eval(), (torch.randn(B, D, T), x_lengths)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
