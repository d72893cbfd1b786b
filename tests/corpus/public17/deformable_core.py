"""fundamentalvision/Deformable-DETR, models/ops/functions/ms_deform_attn_func.py
(``ms_deform_attn_core_pytorch``, the pure-PyTorch reference of the CUDA kernel) and models/ops/modules/
ms_deform_attn.py (``MSDeformAttn.forward``), v1.0: ``value = value_proj(input_flatten).view(N, Len_in, n_heads,
C // n_heads)``; ``sampling_offsets(query).view(N, Len_q, n_heads, n_levels, n_points, 2)``; ``attention_weights
(query).view(N, Len_q, n_heads, n_levels * n_points)``, ``F.softmax(..., -1)`` over the levels and points together,
``.view(N, Len_q, n_heads, n_levels, n_points)``; ``sampling_locations = reference_points[:, :, None, :, None, :]
+ sampling_offsets / offset_normalizer[None, None, None, :, None, :]``; the core splits the value per level,
``value_list[lid_].flatten(2).transpose(1, 2).reshape(N_*M_, D_, H_, W_)``, ``sampling_grids[:, :, :, lid_]
.transpose(1, 2).flatten(0, 1)``, ``F.grid_sample(..., mode='bilinear', padding_mode='zeros',
align_corners=False)``, ``attention_weights.transpose(1, 2).reshape(N_*M_, 1, Lq_, L_*P_)``, ``(torch.stack(
sampling_value_list, dim=-2).flatten(-2) * attention_weights).sum(-1).view(N_, M_*D_, Lq_)``, ``.transpose(1,
2)``; ``output_proj``. Here a decoder's cross-attention: N object queries over a two-level feature pyramid
(``Hp x Wp`` and ``Hp/2 x Wp/2``) flattened into the memory.

Bugs (argument): ``value-heads-not-transposed``: ``value_list[lid_].flatten(2).reshape(N_*M_, D_, H_, W_)``
(the ``transpose(1, 2)`` dropped: the map's pixels fold into the channels); ``softmax-per-level``: the weights
softmaxed over each level's points alone (``F.softmax(w.view(N, Lq, M, L, P), -1)``; the weights of a query then
sum to L, the slip of a re-implementation that softmaxes after the view)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


def ms_deform_attn_core_pytorch(value, value_spatial_shapes, sampling_locations, attention_weights, bug=""):
    N_, S_, M_, D_ = value.shape
    _, Lq_, M_, L_, P_, _ = sampling_locations.shape
    value_list = value.split([H_ * W_ for H_, W_ in value_spatial_shapes], dim=1)
    sampling_grids = 2 * sampling_locations - 1
    sampling_value_list = []
    for lid_, (H_, W_) in enumerate(value_spatial_shapes):
        if bug == "value-heads-not-transposed":
            value_l_ = value_list[lid_].flatten(2).reshape(N_ * M_, D_, H_, W_)
        else:
            value_l_ = value_list[lid_].flatten(2).transpose(1, 2).reshape(N_ * M_, D_, H_, W_)
        sampling_grid_l_ = sampling_grids[:, :, :, lid_].transpose(1, 2).flatten(0, 1)    # (N*M, Lq, P, 2)
        sampling_value_l_ = F.grid_sample(value_l_, sampling_grid_l_, mode="bilinear", padding_mode="zeros",
                                          align_corners=False)                             # (N*M, D, Lq, P)
        sampling_value_list.append(sampling_value_l_)
    attention_weights = attention_weights.transpose(1, 2).reshape(N_ * M_, 1, Lq_, L_ * P_)
    output = (torch.stack(sampling_value_list, dim=-2).flatten(-2) * attention_weights).sum(-1)
    return output.view(N_, M_ * D_, Lq_).transpose(1, 2).contiguous()                    # (N, Lq, M*D)


class MSDeformAttn(nn.Module):
    def __init__(self, d_model, n_levels, n_heads, n_points, bug=""):
        super().__init__()
        self.d_model, self.n_levels, self.n_heads, self.n_points, self.bug = d_model, n_levels, n_heads, n_points, bug
        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj, self.output_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, reference_points, input_flatten, input_spatial_shapes):
        N, Len_q, _ = query.shape
        N, Len_in, _ = input_flatten.shape
        value = self.value_proj(input_flatten).view(N, Len_in, self.n_heads, self.d_model // self.n_heads)
        sampling_offsets = self.sampling_offsets(query).view(N, Len_q, self.n_heads, self.n_levels,
                                                             self.n_points, 2)
        attention_weights = self.attention_weights(query).view(N, Len_q, self.n_heads,
                                                               self.n_levels * self.n_points)
        if self.bug == "softmax-per-level":
            attention_weights = F.softmax(attention_weights.view(N, Len_q, self.n_heads, self.n_levels,
                                                                 self.n_points), -1)
        else:
            attention_weights = F.softmax(attention_weights, -1).view(N, Len_q, self.n_heads, self.n_levels,
                                                                      self.n_points)
        offset_normalizer = torch.stack([input_spatial_shapes[..., 1], input_spatial_shapes[..., 0]], -1)
        sampling_locations = (reference_points[:, :, None, :, None, :]
                              + sampling_offsets / offset_normalizer[None, None, None, :, None, :])
        shapes = [(int(h), int(w)) for h, w in input_spatial_shapes]
        output = ms_deform_attn_core_pytorch(value, shapes, sampling_locations, attention_weights, self.bug)
        return self.output_proj(output)


class DeformableDecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, bug=""):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.cross_attn = MSDeformAttn(d_model, 2, n_heads, 4, bug)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.reference_points = nn.Linear(d_model, 2)

    def forward(self, tgt, query_pos, src, src_spatial_shapes):                    # (B, N, C), (B, S, C)
        q = k = tgt + query_pos
        tgt = self.norm1(tgt + self.self_attn(q, k, tgt)[0])
        reference_points = self.reference_points(query_pos).sigmoid()                 # (B, N, 2)
        reference_points = reference_points[:, :, None].expand(-1, -1, src_spatial_shapes.shape[0], -1)
        tgt2 = self.cross_attn(tgt + query_pos, reference_points, src, src_spatial_shapes)
        return self.norm2(tgt + tgt2)


BUGS = ("value-heads-not-transposed", "softmax-per-level")
TWINS = ()
DIMS = ("B=2 N=5 D=32 H=4", "B=2 N=5 S=30 D=32 H=4")   # (the memory's length, 24 + 6, not declared, declared)
EQUAL = {"B=2 N=5 D=32 H=4": "B=4 N=4 D=32 H=4", "B=2 N=5 S=30 D=32 H=4": "B=4 N=4 S=30 D=32 H=4"}


def build(bug="", B=2, N=5, D=32, H=4):
    torch.manual_seed(0)
    shapes = torch.tensor([[4, 6], [2, 3]])
    S = int((shapes[:, 0] * shapes[:, 1]).sum())
    layer = DeformableDecoderLayer(D, H, bug).eval()
    return (lambda t, p, s: layer(t, p, s, shapes)), (torch.randn(B, N, D), torch.randn(B, N, D),
                                                       torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
