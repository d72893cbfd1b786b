"""facebookresearch/detr issue #247 ("Possible bug in MHAttention for mask prediction", labelled bug;
fmassa: "You are right -- there is a problem with the softmax computation in the MHA for panoptic
segmentation"): ``MHAttentionMap`` (models/segmentation.py) computes per-head attention maps of the object
queries over the encoder's feature map, ``einsum("bqnc,bnchw->bqnhw")``, then normalised them with
``softmax(weights.flatten(2), dim=-1)``: the flatten joins the heads ``n`` with the pixels ``h·w``, so one
softmax ran over every head's pixels together and each head's map no longer summed to one. The fix is
``weights.flatten(3)``.

DETR's idiom: ``q_linear`` on the queries ``(B, Q, D)``, ``k_linear``'s weight applied as a 1×1
``conv2d`` on the memory ``(B, D, h, w)``, heads split by ``view`` on both, ``normalize_fact = (D / n)
** -0.5``, a padding mask ``(B, h, w)`` filled with ``-inf`` through ``unsqueeze(1).unsqueeze(1)``, the
softmax, ``view(weights.size())`` back, dropout. The maps ``(B, Q, n, h, w)`` are the output.

Bug (argument): ``flatten-heads``: the softmax over ``n·h·w``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("flatten-heads",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class MHAttentionMap(nn.Module):
    def __init__(self, query_dim, hidden_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.hidden_dim, self.bug = num_heads, hidden_dim, bug
        self.dropout = nn.Dropout(0.0)
        self.q_linear = nn.Linear(query_dim, hidden_dim)
        self.k_linear = nn.Linear(query_dim, hidden_dim)
        self.normalize_fact = float(hidden_dim / self.num_heads) ** -0.5

    def forward(self, q, k, mask=None):
        q = self.q_linear(q)                                                    # (B, Q, D)
        k = F.conv2d(k, self.k_linear.weight.unsqueeze(-1).unsqueeze(-1), self.k_linear.bias)   # (B, D, h, w)
        qh = q.view(q.shape[0], q.shape[1], self.num_heads, self.hidden_dim // self.num_heads)
        kh = k.view(k.shape[0], self.num_heads, self.hidden_dim // self.num_heads, k.shape[-2], k.shape[-1])
        weights = torch.einsum("bqnc,bnchw->bqnhw", qh * self.normalize_fact, kh)   # (B, Q, n, h, w)
        if mask is not None:
            weights.masked_fill_(mask.unsqueeze(1).unsqueeze(1), float("-inf"))
        flat = weights.flatten(2) if self.bug == "flatten-heads" else weights.flatten(3)
        weights = F.softmax(flat, dim=-1).view(weights.size())                 # [softmax]
        return self.dropout(weights)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    h, w = 3, 5
    mask = torch.zeros(B, h, w, dtype=torch.bool)
    mask[-1, :, -2:] = True                                                     # the last image padded on the right
    return MHAttentionMap(D, D, H, bug).eval(), (torch.randn(B, T, D), torch.randn(B, D, h, w), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
