"""omihub777/ViT-CIFAR issue #9 (pull requests #11 and #12, "fix: use per-head dimension (d_k) for attention
scaling in MHSA", both closed unmerged): ``layers.py``'s ``MultiHeadSelfAttention`` divided the scores by
``self.sqrt_d = self.feats**0.5``, the square root of the whole feature width, where scaled dot-product attention
divides by the per-head width, ``(self.feats // self.head)**0.5`` ("When head=8 and feats=512, this changes the
divisor from sqrt(512) = 22.6 to sqrt(64) = 8"); an earlier ``layers.py`` (commit 3ef5f64) took the softmax of the
scores with no scale at all.

The idiom (``TransformerEncoder`` / ``MultiHeadSelfAttention``, and ``ViT``'s class token and learned positions):
``q``/``k``/``v`` ``nn.Linear(feats, feats)``, ``view(b, n, self.head, self.feats//self.head).transpose(1,2)``,
``F.softmax(torch.einsum("bhif, bhjf->bhij", q, k)/self.sqrt_d, dim=-1)``, ``torch.einsum("bhij, bhjf->bihf",
score, v)`` (heads merged by the einsum's output order), ``self.o(attn.flatten(2))``; pre-norm residuals and a
GELU MLP; ``fc`` on the class token's row.

Bugs: ``scale-total-feats``: ``sqrt(feats)`` (issue #9); ``no-scale``: no division (commit 3ef5f64);
``einsum-heads-first``: the value einsum written ``"bhij, bhjf->bhif"`` and then ``reshape(b, n, -1)`` (the heads
folded into the token axis)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("scale-total-feats", "no-scale", "einsum-heads-first")
TWINS = ()
DIMS = ("B=2 T=5 D=32 H=4",)
EQUAL = {DIMS[0]: "B=4 T=4 D=32 H=4"}


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, feats: int, head: int = 8, bug=""):
        super().__init__()
        self.head, self.feats, self.bug = head, feats, bug
        self.sqrt_d = self.feats**0.5 if bug == "scale-total-feats" else (self.feats // self.head)**0.5
        self.q = nn.Linear(feats, feats)
        self.k = nn.Linear(feats, feats)
        self.v = nn.Linear(feats, feats)
        self.o = nn.Linear(feats, feats)

    def forward(self, x):
        b, n, f = x.size()
        q = self.q(x).view(b, n, self.head, self.feats//self.head).transpose(1, 2)     # (b, h, n, f//h)
        k = self.k(x).view(b, n, self.head, self.feats//self.head).transpose(1, 2)     # (b, h, n, f//h)
        v = self.v(x).view(b, n, self.head, self.feats//self.head).transpose(1, 2)     # (b, h, n, f//h)
        if self.bug == "no-scale":
            score = F.softmax(torch.einsum("bhif, bhjf->bhij", q, k), dim=-1)           # (b, h, n, n)
        else:
            score = F.softmax(torch.einsum("bhif, bhjf->bhij", q, k)/self.sqrt_d, dim=-1)   # (b, h, n, n)
        if self.bug == "einsum-heads-first":
            attn = torch.einsum("bhij, bhjf->bhif", score, v).reshape(b, n, -1)         # (b, n, f)
        else:
            attn = torch.einsum("bhij, bhjf->bihf", score, v).flatten(2)                # (b, n, f)
        return self.o(attn)


class TransformerEncoder(nn.Module):
    def __init__(self, feats: int, head: int = 8, bug=""):
        super().__init__()
        self.la1 = nn.LayerNorm(feats)
        self.msa = MultiHeadSelfAttention(feats, head=head, bug=bug)
        self.la2 = nn.LayerNorm(feats)
        self.mlp = nn.Sequential(nn.Linear(feats, feats), nn.GELU(), nn.Linear(feats, feats), nn.GELU())

    def forward(self, x):
        out = self.msa(self.la1(x)) + x
        out = self.mlp(self.la2(out)) + out
        return out


class ViT(nn.Module):
    def __init__(self, num_tokens, hidden, head, num_classes=10, bug=""):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, hidden))
        self.pos_emb = nn.Parameter(torch.randn(1, num_tokens + 1, hidden))
        self.enc = TransformerEncoder(hidden, head=head, bug=bug)
        self.fc = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, num_classes))

    def forward(self, out):                                                             # (b, n, f) patch embeddings
        out = torch.cat([self.cls_token.repeat(out.size(0), 1, 1), out], dim=1)         # (b, n+1, f)
        out = out + self.pos_emb
        out = self.enc(out)
        return self.fc(out[:, 0])                                                       # (b, classes)


def build(bug="", B=2, T=5, D=32, H=4):
    torch.manual_seed(0)
    return ViT(T, D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
