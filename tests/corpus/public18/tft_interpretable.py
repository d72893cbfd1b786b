"""jdb78/pytorch-forecasting, pytorch_forecasting/models/temporal_fusion_transformer/sub_modules.py (v1.0,
``ScaledDotProductAttention``, ``InterpretableMultiHeadAttention``) and ``_tft.get_attention_mask``: one value
projection ``v_layer`` Linear(D, d_k) shared by every head, per-head ``q_layers``/``k_layers`` (ModuleLists of
Linear(D, d_k)); each head ``torch.bmm(q, k.permute(0, 2, 1))`` scaled by ``sqrt(d_k)``, ``masked_fill(mask,
-1e9)``, softmax over ``dim=2``, ``torch.bmm(attn, v)``; ``torch.stack(heads, dim=2)`` and ``torch.stack(attns,
dim=2)``, ``outputs = torch.mean(head, dim=2)``, ``w_h`` Linear(d_k, D); the decoder's causal mask
``torch.triu(ones(T, T), diagonal=1).bool()`` (True where hidden).

Bugs (argument): ``softmax-over-queries``: ``ScaledDotProductAttention``'s softmax over ``dim=1`` (the queries of
the ``(B, T, T)`` scores, the slip of counting the heads' axis that the per-head bmm no longer has);
``mask-hides-diagonal``: the mask built with ``diagonal=0`` (each step hides itself too, the first sees nothing:
the off-by-one of pytorch-forecasting issue #1127's discussion of the decoder mask)."""

import sys

import torch
from torch import nn


class ScaledDotProductAttention(nn.Module):
    def __init__(self, bug=""):
        super().__init__()
        self.bug = bug

    def forward(self, q, k, v, mask):
        attn = torch.bmm(q, k.permute(0, 2, 1))                                      # (B, T, T)
        attn = attn / torch.sqrt(torch.tensor(k.size(-1), dtype=attn.dtype))
        attn = attn.masked_fill(mask, -1e9)
        attn = torch.softmax(attn, dim=1 if self.bug == "softmax-over-queries" else 2)
        return torch.bmm(attn, v), attn


class InterpretableMultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, bug=""):
        super().__init__()
        self.n_head, self.d_k = n_head, d_model // n_head
        self.v_layer = nn.Linear(d_model, self.d_k)
        self.q_layers = nn.ModuleList([nn.Linear(d_model, self.d_k) for _ in range(n_head)])
        self.k_layers = nn.ModuleList([nn.Linear(d_model, self.d_k) for _ in range(n_head)])
        self.attention = ScaledDotProductAttention(bug)
        self.w_h = nn.Linear(self.d_k, d_model, bias=False)

    def forward(self, q, k, v, mask):
        heads, attns = [], []
        vs = self.v_layer(v)
        for i in range(self.n_head):
            qs, ks = self.q_layers[i](q), self.k_layers[i](k)
            head, attn = self.attention(qs, ks, vs, mask)
            heads.append(head)
            attns.append(attn)
        head = torch.stack(heads, dim=2) if self.n_head > 1 else heads[0]          # (B, T, H, d_k)
        attn = torch.stack(attns, dim=2)
        outputs = torch.mean(head, dim=2) if self.n_head > 1 else head
        return self.w_h(outputs), attn


class Decoder(nn.Module):
    def __init__(self, d_model, n_head, bug=""):
        super().__init__()
        self.bug = bug
        self.multihead_attn = InterpretableMultiHeadAttention(n_head, d_model, bug)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):                                                          # (B, T, D)
        T = x.size(1)
        diagonal = 0 if self.bug == "mask-hides-diagonal" else 1
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=diagonal)
        mask = mask.unsqueeze(0).expand(x.size(0), -1, -1)
        out, _ = self.multihead_attn(x, x, x, mask)
        return self.norm(x + out)


BUGS = ("softmax-over-queries", "mask-hides-diagonal")
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Decoder(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
