"""InseeFrLab/torchTextClassifiers PR #92 ("fix: correct LabelAttention mask", merged): ``LabelAttention``'s
learned label queries ``(L, D)`` attend over the token embeddings of a padded batch with
``F.scaled_dot_product_attention``; the padding mask ``ids == pad`` (True at padding) was handed over as
``attn_mask``, where SDPA's boolean mask means True = may attend: each label read only the padding tokens.
The fix passes ``~pad_mask`` (True at the real tokens), shaped ``(B, 1, 1, T)``.

Bug (argument): ``mask-inverted``."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("mask-inverted",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)
PAD = 0


class LabelAttention(nn.Module):
    def __init__(self, d, h, n_labels=3, bug=""):
        super().__init__()
        self.h, self.hd, self.bug = h, d // h, bug
        self.label_queries = nn.Parameter(torch.randn(n_labels, d))
        self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, 1)

    def forward(self, token_embeddings, input_ids):
        B, T, D = token_embeddings.shape
        q = self.label_queries.view(1, -1, self.h, self.hd).transpose(1, 2)      # (1, H, L, d)
        q = q.expand(B, -1, -1, -1)                                              # (B, H, L, d)
        k = self.k_proj(token_embeddings).view(B, T, self.h, self.hd).transpose(1, 2)  # (B, H, T, d)
        v = self.v_proj(token_embeddings).view(B, T, self.h, self.hd).transpose(1, 2)  # (B, H, T, d)
        pad_mask = (input_ids == PAD)                                            # (B, T) True at padding
        keep = pad_mask if self.bug == "mask-inverted" else ~pad_mask
        attn_mask = keep[:, None, None, :]                                       # (B, 1, 1, T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)       # (B, H, L, d)
        y = y.transpose(1, 2).reshape(B, -1, D)                                  # (B, L, D)
        return self.out(y).squeeze(-1)                                           # (B, L)


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    ids = torch.randint(1, 9, (B, T))
    ids[0, T - 2:] = PAD   # sequence 0 ends in two padding tokens
    return LabelAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D), ids)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
