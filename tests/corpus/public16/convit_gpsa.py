"""facebookresearch/convit, convit.py (``GPSA``, ``get_rel_indices``, ``get_attention``): q/k from one
``qk = nn.Linear(dim, dim * 2)`` reshaped ``(B, N, 2, H, d).permute(2, 0, 3, 1, 4)``, v from its own linear; a
``[1, N, N, 3]`` relative-offset tensor (``indx``, ``indy``, ``indd = indx**2 + indy**2``) built for a square
grid of patches, ``pos_score = self.pos_proj(self.rel_indices).expand(B, -1, -1, -1).permute(0, 3, 1, 2)``
(``pos_proj = nn.Linear(3, num_heads)``), ``pos_score.softmax(dim=-1)``; the content ``patch_score = (q @
k.transpose(-2, -1)) * scale``, softmax; per-head ``gating = self.gating_param.view(1, -1, 1, 1)``, ``attn = (1. -
sigmoid(gating)) * patch_score + sigmoid(gating) * pos_score``, ``attn /= attn.sum(dim=-1).unsqueeze(-1)``; then
``(attn @ v).transpose(1, 2).reshape(B, N, C)`` and ``proj``.

Bugs (argument): ``pos-score-reshaped``: ``pos_proj(rel_indices).expand(B, -1, -1, -1).reshape(B, H, N, N)``
(the ``permute(0, 3, 1, 2)`` written as a reshape: the heads' positional scores interleaved with the queries);
``pos-softmax-over-queries``: ``pos_score.softmax(dim=-2)`` (normalised over queries: the renormalisation by
``attn.sum(-1)`` hides it from a row-sum check)."""

import sys

import torch
from torch import nn


def get_rel_indices(num_patches):
    img_size = int(num_patches**0.5)
    rel_indices = torch.zeros(1, num_patches, num_patches, 3)
    ind = torch.arange(img_size).view(1, -1) - torch.arange(img_size).view(-1, 1)  # (g, g)
    indx = ind.repeat(img_size, img_size)
    indy = ind.repeat_interleave(img_size, dim=0).repeat_interleave(img_size, dim=1)
    indd = indx**2 + indy**2
    rel_indices[:, :, :, 2] = indd.unsqueeze(0)
    rel_indices[:, :, :, 1] = indy.unsqueeze(0)
    rel_indices[:, :, :, 0] = indx.unsqueeze(0)
    return rel_indices                                                             # (1, N, N, 3)


class GPSA(nn.Module):
    def __init__(self, dim, num_heads, num_patches, bug=""):
        super().__init__()
        self.num_heads, self.bug = num_heads, bug
        self.scale = (dim // num_heads) ** -0.5
        self.qk = nn.Linear(dim, dim * 2, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.pos_proj = nn.Linear(3, num_heads)
        self.gating_param = nn.Parameter(torch.ones(num_heads))
        self.register_buffer("rel_indices", get_rel_indices(num_patches), persistent=False)

    def get_attention(self, x):                                                    # (B, N, C)
        B, N, C = x.shape
        qk = self.qk(x).reshape(B, N, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k = qk[0], qk[1]                                                        # (B, H, N, d)
        pos_score = self.pos_proj(self.rel_indices).expand(B, -1, -1, -1)          # (B, N, N, H)
        if self.bug == "pos-score-reshaped":
            pos_score = pos_score.reshape(B, self.num_heads, N, N)
        else:
            pos_score = pos_score.permute(0, 3, 1, 2)                              # (B, H, N, N)
        patch_score = (q @ k.transpose(-2, -1)) * self.scale                       # (B, H, N, N)
        patch_score = patch_score.softmax(dim=-1)
        pos_score = pos_score.softmax(dim=-2 if self.bug == "pos-softmax-over-queries" else -1)
        gating = self.gating_param.view(1, -1, 1, 1)                               # (1, H, 1, 1)
        attn = (1.0 - torch.sigmoid(gating)) * patch_score + torch.sigmoid(gating) * pos_score
        attn /= attn.sum(dim=-1).unsqueeze(-1)
        return attn

    def forward(self, x):                                                          # (B, N, C)
        B, N, C = x.shape
        attn = self.get_attention(x)
        v = self.v(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)                            # (B, N, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, heads, num_patches, bug=""):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = GPSA(dim, heads, num_patches, bug)

    def forward(self, x):
        return x + self.attn(self.norm1(x))


BUGS = ("pos-score-reshaped", "pos-softmax-over-queries")
TWINS = ()
DIMS = ("B=2 T=9 D=32 H=4",)
EQUAL = {"B=2 T=9 D=32 H=4": "B=4 T=16 D=32 H=4"}


def build(bug="", B=2, T=9, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, T, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
