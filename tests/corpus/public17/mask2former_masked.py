"""facebookresearch/Mask2Former, mask2former/modeling/transformer_decoder/mask2former_transformer_decoder.py
(``MultiScaleMaskedTransformerDecoder.forward``, ``forward_prediction_heads``, ``CrossAttentionLayer``,
``SelfAttentionLayer``), v0.1: learnt queries ``query_feat.weight.unsqueeze(1).repeat(1, bs, 1)`` ``(Q, B, C)``
(sequence-first, as ``nn.MultiheadAttention`` takes them); the memory ``src`` ``(HW, B, C)``; the prediction
heads ``decoder_norm(output).transpose(0, 1)``, ``mask_embed``, ``einsum("bqc,bchw->bqhw", mask_embed,
mask_features)``, ``F.interpolate`` to the memory's size, and the attention mask ``(attn_mask.sigmoid().flatten(2)
.unsqueeze(1).repeat(1, num_heads, 1, 1).flatten(0, 1) < 0.5).bool()`` ``(B*H, Q, HW)`` (batch-major, as the
library's ``attn_mask`` of shape ``(N*num_heads, L, S)`` is laid out); a fully masked row un-masked
(``attn_mask[torch.where(attn_mask.sum(-1) == attn_mask.shape[-1])] = False``); masked cross-attention, then
self-attention over the queries, then the FFN; each layer's prediction heads make the next layer's mask.

Bugs (argument): ``mask-repeat-heads-major``: ``attn_mask.sigmoid().flatten(2).repeat(num_heads, 1, 1)`` (the
``(B, Q, HW)`` masks tiled heads-major: entry ``h*B + b`` where the library reads ``b*H + h``, so most heads of
each image are masked by another image's predicted masks; facebookresearch/Mask2Former re-implementations
(e.g. detrex's first port) met it); ``mask-threshold-inverted``: ``>= 0.5`` where ``< 0.5`` is meant (each query
attends outside its predicted mask: values only, no shape or name shows it)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class CrossAttentionLayer(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, tgt, memory, memory_mask, pos, query_pos):                   # (Q, B, C), (HW, B, C)
        tgt2 = self.multihead_attn(query=tgt + query_pos, key=memory + pos, value=memory,
                                   attn_mask=memory_mask)[0]
        return self.norm(tgt + tgt2)


class SelfAttentionLayer(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, tgt, query_pos):                                             # (Q, B, C)
        q = k = tgt + query_pos
        return self.norm(tgt + self.self_attn(q, k, value=tgt)[0])


class MaskedTransformerDecoder(nn.Module):
    def __init__(self, hidden_dim, nheads, num_queries, num_classes=5, layers=2, bug=""):
        super().__init__()
        self.num_heads, self.bug = nheads, bug
        self.query_feat, self.query_embed = nn.Embedding(num_queries, hidden_dim), nn.Embedding(num_queries,
                                                                                              hidden_dim)
        self.cross = nn.ModuleList([CrossAttentionLayer(hidden_dim, nheads) for _ in range(layers)])
        self.selfs = nn.ModuleList([SelfAttentionLayer(hidden_dim, nheads) for _ in range(layers)])
        self.ffns = nn.ModuleList([nn.Sequential(nn.Linear(hidden_dim, 2 * hidden_dim), nn.ReLU(),
                                                 nn.Linear(2 * hidden_dim, hidden_dim)) for _ in range(layers)])
        self.decoder_norm = nn.LayerNorm(hidden_dim)
        self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
        self.mask_embed = nn.Linear(hidden_dim, hidden_dim)

    def forward_prediction_heads(self, output, mask_features, attn_mask_target_size):
        decoder_output = self.decoder_norm(output).transpose(0, 1)                   # (B, Q, C)
        outputs_class = self.class_embed(decoder_output)
        mask_embed = self.mask_embed(decoder_output)
        outputs_mask = torch.einsum("bqc,bchw->bqhw", mask_embed, mask_features)     # (B, Q, Hm, Wm)
        attn_mask = F.interpolate(outputs_mask, size=attn_mask_target_size, mode="bilinear", align_corners=False)
        if self.bug == "mask-repeat-heads-major":
            attn_mask = (attn_mask.sigmoid().flatten(2).repeat(self.num_heads, 1, 1) < 0.5).bool()
        elif self.bug == "mask-threshold-inverted":
            attn_mask = (attn_mask.sigmoid().flatten(2).unsqueeze(1).repeat(1, self.num_heads, 1, 1)
                         .flatten(0, 1) >= 0.5).bool()
        else:
            attn_mask = (attn_mask.sigmoid().flatten(2).unsqueeze(1).repeat(1, self.num_heads, 1, 1)
                         .flatten(0, 1) < 0.5).bool()                                # (B*H, Q, HW)
        return outputs_class, outputs_mask, attn_mask.detach()

    def forward(self, src, pos, mask_features, size):                              # (HW, B, C), (B, C, Hm, Wm)
        bs = src.shape[1]
        query_embed = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)          # (Q, B, C)
        output = self.query_feat.weight.unsqueeze(1).repeat(1, bs, 1)
        _, _, attn_mask = self.forward_prediction_heads(output, mask_features, size)
        for cross, selfa, ffn in zip(self.cross, self.selfs, self.ffns):
            attn_mask[torch.where(attn_mask.sum(-1) == attn_mask.shape[-1])] = False
            output = cross(output, src, attn_mask, pos, query_embed)
            output = selfa(output, query_embed)
            output = output + ffn(output)
            outputs_class, outputs_mask, attn_mask = self.forward_prediction_heads(output, mask_features, size)
        return outputs_class, outputs_mask


BUGS = ("mask-repeat-heads-major", "mask-threshold-inverted")
TWINS = ()
DIMS = ("B=2 N=5 D=32 H=4 Hp=3 Wp=4",)
EQUAL = {"B=2 N=5 D=32 H=4 Hp=3 Wp=4": "B=4 N=4 D=32 H=4 Hp=4 Wp=4"}


def build(bug="", B=2, N=5, D=32, H=4, Hp=3, Wp=4):
    torch.manual_seed(0)
    model = MaskedTransformerDecoder(D, H, N, bug=bug).eval()
    src, pos = torch.randn(Hp * Wp, B, D), torch.randn(Hp * Wp, B, D)
    mask_features = torch.randn(B, D, 2 * Hp, 2 * Wp)
    return (lambda s, p, m: model(s, p, m, (Hp, Wp))), (src, pos, mask_features)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
