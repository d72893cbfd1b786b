"""om-ai-lab/OmDet issue #19 ("Batched MultiHeadAttention", closed): OmDet-Turbo's ELA encoder built the
``TransformerEncoderLayer``'s attention as ``nn.MultiheadAttention(d_model, nhead, dropout)``, sequence-first by
default, although the layer is fed ``(batch, h*w, channels)`` tokens; the reporter (Hugging Face, porting the
model) saw batched inference disagree with one image at a time, and the maintainers changed it to
``batch_first=True`` (the weights unchanged).

The idiom (RT-DETR's hybrid encoder, which OmDet-Turbo's ELA encoder follows): the top feature map
``(B, C, h, w)`` flattened to tokens with ``flatten(2).permute(0, 2, 1)``, a fixed 2-D sin-cos position
embedding added to the queries and keys only, a post-norm encoder layer (self-attention, dropout, residual,
``norm1``; a ReLU feed-forward, residual, ``norm2``), and the tokens folded back to ``(B, C, h, w)``.

Bug (sequence-first): ``sequence-first-attention``."""

import sys

import torch
from torch import nn

BUGS = ("sequence-first-attention",)
TWINS = ()
DIMS = ("B=2 D=32 H=4 Hp=3 Wp=5",)


def build_2d_sincos_position_embedding(w, h, embed_dim, temperature=10000.0):
    grid_w = torch.arange(int(w), dtype=torch.float32)
    grid_h = torch.arange(int(h), dtype=torch.float32)
    grid_w, grid_h = torch.meshgrid(grid_w, grid_h, indexing="ij")                  # (w, h)
    pos_dim = embed_dim // 4
    omega = 1.0 / (temperature ** (torch.arange(pos_dim, dtype=torch.float32) / pos_dim))
    out_w = grid_w.flatten()[..., None] @ omega[None]                               # (w*h, D/4)
    out_h = grid_h.flatten()[..., None] @ omega[None]                               # (w*h, D/4)
    return torch.cat([out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()], dim=1)[None, :, :]  # (1, w*h, D)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, dropout=0.0, bug=""):
        super().__init__()
        batch_first = bug != "sequence-first-attention"
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout, batch_first=batch_first)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, src, pos_embed=None):
        residual = src
        q = k = src if pos_embed is None else src + pos_embed                         # (B, N, C)
        src, _ = self.self_attn(q, k, value=src)                                      # (B, N, C)
        src = self.norm1(residual + self.dropout1(src))
        residual = src
        src = self.linear2(self.dropout(torch.relu(self.linear1(src))))
        return self.norm2(residual + self.dropout2(src))


class ELAEncoder(nn.Module):
    def __init__(self, hidden_dim, nhead, bug=""):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.layer = TransformerEncoderLayer(hidden_dim, nhead, 4 * hidden_dim, bug=bug)

    def forward(self, feat):
        _, _, h, w = feat.shape
        src_flatten = feat.flatten(2).permute(0, 2, 1)                                # (B, h*w, C)
        pos_embed = build_2d_sincos_position_embedding(w, h, self.hidden_dim)         # (1, w*h, C)
        memory = self.layer(src_flatten, pos_embed=pos_embed)                         # (B, h*w, C)
        return memory.permute(0, 2, 1).reshape(-1, self.hidden_dim, h, w)             # (B, C, h, w)


def build(bug="", B=2, D=32, H=4, Hp=3, Wp=5):
    torch.manual_seed(0)
    return ELAEncoder(D, H, bug=bug).eval(), (torch.randn(B, D, Hp, Wp),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
