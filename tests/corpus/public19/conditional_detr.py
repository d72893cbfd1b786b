"""Atten4Vis/ConditionalDETR, models/transformer.py and models/attention.py (``TransformerDecoderLayer``'s
cross-attention, commit of 2021): object queries ``(N, B, D)`` over the encoder's memory ``(S, B, D)``; the
content query and key from ``ca_qcontent_proj``/``ca_kcontent_proj``, their positional parts from
``ca_qpos_sine_proj`` (the sine embedding of each query's reference point) and ``ca_kpos_proj``; per head the
content and positional halves concatenated: ``q.view(N, B, H, d)`` and ``query_sine_embed.view(N, B, H, d)``
joined ``cat([q, q_pos], dim=3).view(N, B, 2 * D)`` (the same for k); attention with ``2·d`` per head and
``scaling = (2 d) ** -0.5``; values of width d; ``out_proj``.

Bugs (argument): ``cat-before-heads``: ``cat([q, q_pos], dim=2)`` on ``(N, B, D)`` before the head split (each
"head" of width 2·d then holds two content heads or two positional ones, not its own pair: the slip of joining
before viewing); ``scale-of-content-half``: ``scaling = d ** -0.5`` (the content head's width, where
the concatenated query is 2·d wide: the scale a port keeps from DETR's own attention)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F


class ConditionalCrossAttention(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.nhead, self.bug = nhead, bug
        self.ca_qcontent_proj = nn.Linear(d_model, d_model)
        self.ca_qpos_sine_proj = nn.Linear(d_model, d_model)
        self.ca_kcontent_proj = nn.Linear(d_model, d_model)
        self.ca_kpos_proj = nn.Linear(d_model, d_model)
        self.ca_v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, tgt, memory, pos, query_sine_embed):                        # (N, B, D), (S, B, D)
        N, B, D = tgt.shape
        S = memory.shape[0]
        H, d = self.nhead, D // self.nhead
        q = self.ca_qcontent_proj(tgt)
        k = self.ca_kcontent_proj(memory)
        v = self.ca_v_proj(memory)
        k_pos = self.ca_kpos_proj(pos)
        q_pos = self.ca_qpos_sine_proj(query_sine_embed)
        if self.bug == "cat-before-heads":
            q = torch.cat([q, q_pos], dim=2)                                         # (N, B, 2D)
            k = torch.cat([k, k_pos], dim=2)
        else:
            q = torch.cat([q.view(N, B, H, d), q_pos.view(N, B, H, d)], dim=3).view(N, B, 2 * D)
            k = torch.cat([k.view(S, B, H, d), k_pos.view(S, B, H, d)], dim=3).view(S, B, 2 * D)
        scaling = d**-0.5 if self.bug == "scale-of-content-half" else (2 * d) ** -0.5
        q = q.contiguous().view(N, B * H, 2 * d).transpose(0, 1) * scaling            # (B*H, N, 2d)
        k = k.contiguous().view(S, B * H, 2 * d).transpose(0, 1)                      # (B*H, S, 2d)
        v = v.contiguous().view(S, B * H, d).transpose(0, 1)                          # (B*H, S, d)
        attn = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)                    # (B*H, N, S)
        out = torch.bmm(attn, v).transpose(0, 1).contiguous().view(N, B, D)
        return self.out_proj(out)


class DecoderCrossAttn(nn.Module):
    def __init__(self, d_model, nhead, bug=""):
        super().__init__()
        self.query_pos = nn.Parameter(torch.randn(1, 1, d_model))
        self.attn = ConditionalCrossAttention(d_model, nhead, bug)

    def forward(self, tgt, memory, pos, query_sine_embed):
        return tgt + self.attn(tgt, memory, pos, query_sine_embed)


BUGS = ("cat-before-heads", "scale-of-content-half")
TWINS = ()
DIMS = ("B=2 N=4 S=6 D=32 H=4",)
EQUAL = {"B=2 N=4 S=6 D=32 H=4": "B=4 N=4 S=4 D=32 H=4"}


def build(bug="", B=2, N=4, S=6, D=32, H=4):
    torch.manual_seed(0)
    inputs = (torch.randn(N, B, D), torch.randn(S, B, D), torch.randn(S, B, D), torch.randn(N, B, D))
    return DecoderCrossAttn(D, H, bug).eval(), inputs


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
