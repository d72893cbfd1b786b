"""huggingface/transformers, ``src/transformers/models/layoutlmv3/modeling_layoutlmv3.py`` (v4.40,
``LayoutLMv3SelfAttention``, ``LayoutLMv3Encoder._cal_1d_pos_emb`` / ``_cal_2d_pos_emb``,
``relative_position_bucket``): the text tokens' 1-D relative positions (``position_ids.unsqueeze(-2) -
position_ids.unsqueeze(-1)``) and the 2-D ones of each token's box (``bbox[:, :, 0]`` for x, ``bbox[:, :, 3]``
for y), each bucketed, ``one_hot``-ed and read by a bias-free ``Linear(num_buckets, H)``, then
``permute(0, 3, 1, 2)`` to ``(B, H, T, T)``; scores ``matmul(q / sqrt(d), k^T)`` plus ``(rel_pos + rel_2d_pos) /
sqrt(d)``, plus the extended padding mask ``(1 - mask)[:, None, None, :] * finfo.min``; ``cogview_attention``
(scores divided by ``alpha = 32``, their row max subtracted, multiplied back, ``Softmax(dim=-1)``); context
``permute(0, 2, 1, 3).contiguous().view``.

Bugs: ``mask-not-inverted``: the extended mask written ``mask * finfo.min`` (the ``1 -`` dropped, the slip of
``get_extended_attention_mask`` re-implementations: the pads are kept and every real token hidden);
``cogview-max-over-queries``: ``cogview_attention``'s stabilising max taken ``amax(dim=-2)`` (over the queries:
each key's column shifted by its own constant, which the softmax over the keys does not cancel)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    ret = 0
    if bidirectional:
        num_buckets //= 2
        ret += (relative_position > 0).long() * num_buckets
        n = torch.abs(relative_position)
    else:
        n = torch.max(-relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                                * (num_buckets - max_exact)).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return ret + torch.where(is_small, n, val_if_large)


class LayoutLMv3SelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, bug=""):
        super().__init__()
        self.num_attention_heads, self.bug = num_heads, bug
        self.attention_head_size = hidden_size // num_heads
        self.all_head_size = hidden_size
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def cogview_attention(self, attention_scores, alpha=32):
        scaled_attention_scores = attention_scores / alpha
        dim = -2 if self.bug == "cogview-max-over-queries" else -1
        max_value = scaled_attention_scores.amax(dim=dim).unsqueeze(dim)
        new_attention_scores = (scaled_attention_scores - max_value) * alpha
        return nn.Softmax(dim=-1)(new_attention_scores)

    def forward(self, hidden_states, attention_mask, rel_pos, rel_2d_pos):
        query_layer = self.transpose_for_scores(self.query(hidden_states))             # (B, H, T, d)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer / math.sqrt(self.attention_head_size),
                                        key_layer.transpose(-1, -2))                    # (B, H, T, T)
        attention_scores += (rel_pos + rel_2d_pos) / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = self.cogview_attention(attention_scores)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)                              # (B, T, D)


class LayoutLMv3Encoder(nn.Module):
    def __init__(self, hidden_size, num_heads, bug="", rel_pos_bins=32, max_rel_pos=128, max_rel_2d_pos=256):
        super().__init__()
        self.bug = bug
        self.rel_pos_bins, self.max_rel_pos, self.max_rel_2d_pos = rel_pos_bins, max_rel_pos, max_rel_2d_pos
        self.rel_pos_bias = nn.Linear(rel_pos_bins, num_heads, bias=False)
        self.rel_pos_x_bias = nn.Linear(rel_pos_bins, num_heads, bias=False)
        self.rel_pos_y_bias = nn.Linear(rel_pos_bins, num_heads, bias=False)
        self.attention = LayoutLMv3SelfAttention(hidden_size, num_heads, bug)

    def _cal_1d_pos_emb(self, position_ids):
        rel_pos_mat = position_ids.unsqueeze(-2) - position_ids.unsqueeze(-1)
        rel_pos = relative_position_bucket(rel_pos_mat, num_buckets=self.rel_pos_bins,
                                           max_distance=self.max_rel_pos)
        rel_pos = F.one_hot(rel_pos, num_classes=self.rel_pos_bins).float()
        rel_pos = self.rel_pos_bias(rel_pos).permute(0, 3, 1, 2)
        return rel_pos.contiguous()

    def _cal_2d_pos_emb(self, bbox):
        position_coord_x, position_coord_y = bbox[:, :, 0], bbox[:, :, 3]
        rel_pos_x_2d_mat = position_coord_x.unsqueeze(-2) - position_coord_x.unsqueeze(-1)
        rel_pos_y_2d_mat = position_coord_y.unsqueeze(-2) - position_coord_y.unsqueeze(-1)
        rel_pos_x = relative_position_bucket(rel_pos_x_2d_mat, num_buckets=self.rel_pos_bins,
                                             max_distance=self.max_rel_2d_pos)
        rel_pos_y = relative_position_bucket(rel_pos_y_2d_mat, num_buckets=self.rel_pos_bins,
                                             max_distance=self.max_rel_2d_pos)
        rel_pos_x = F.one_hot(rel_pos_x, num_classes=self.rel_pos_bins).float()
        rel_pos_y = F.one_hot(rel_pos_y, num_classes=self.rel_pos_bins).float()
        rel_pos_x = self.rel_pos_x_bias(rel_pos_x).permute(0, 3, 1, 2)
        rel_pos_y = self.rel_pos_y_bias(rel_pos_y).permute(0, 3, 1, 2)
        return (rel_pos_x + rel_pos_y).contiguous()                                     # (B, H, T, T)

    def forward(self, hidden_states, bbox, attention_mask, position_ids):
        rel_pos = self._cal_1d_pos_emb(position_ids)
        rel_2d_pos = self._cal_2d_pos_emb(bbox)
        if self.bug == "mask-not-inverted":
            extended = attention_mask[:, None, None, :].float() * torch.finfo(torch.float32).min
        else:
            extended = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        return self.attention(hidden_states, extended, rel_pos, rel_2d_pos)


BUGS = ("mask-not-inverted", "cogview-max-over-queries")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    model = LayoutLMv3Encoder(D, H, bug).eval()
    x0, y0 = torch.randint(0, 500, (B, T)), torch.randint(0, 500, (B, T))
    bbox = torch.stack([x0, y0, x0 + 40, y0 + 12], dim=-1)                              # (B, T, 4)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[0, -2:] = 0
    position_ids = torch.arange(T).expand(B, T)
    return model, (torch.randn(B, T, D), bbox, attention_mask, position_ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
