"""SeanLee97/AnglE issue #101 ("Possibly incorrect mean pooling", fixed by PR #102): the ``avg`` pooling of
``get_pooling`` summed the masked token states per sentence over the tokens, ``sum(outputs * mask[:, :, None],
dim=1)``, but divided by ``torch.sum(attention_mask)``, the mask summed over the whole batch: every sentence's
mean was divided by the number of real tokens in the batch, not in that sentence ("a global sum being used",
the maintainer). The fix divides by ``attention_mask.sum(dim=1, keepdim=True)``.

The idiom: a BERT-style encoder layer (``query/key/value`` ``Linear``, ``view(B, T, H, d).permute(0, 2, 1,
3)``, the extended mask ``(1.0 - mask[:, None, None, :]) * finfo.min`` added to the scores,
``softmax(-1)``, ``permute(0, 2, 1, 3).contiguous().view(B, T, D)``, a dense output and ``LayerNorm`` with
the residual), then AnglE's ``avg`` pooling of the last hidden state; the second sentence padded by two.

Bug (argument): ``global-mask-sum``: the pooled sum divided by ``torch.sum(attention_mask)``."""

import sys

import torch
from torch import nn

BUGS = ("global-mask-sum",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class BertLayerAvg(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.head_dim, self.bug = heads, dim // heads, bug
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.dense, self.norm = nn.Linear(dim, dim), nn.LayerNorm(dim)

    def transpose_for_scores(self, x):
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_dim).permute(0, 2, 1, 3)    # (B, H, T, d)

    def forward(self, hidden_states, attention_mask):                     # (B, T, D), (B, T) of 1/0
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        extended = (1.0 - attention_mask[:, None, None, :]) * torch.finfo(hidden_states.dtype).min
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.head_dim ** 0.5 + extended
        probs = scores.softmax(dim=-1)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        context = context.view(hidden_states.shape[0], hidden_states.shape[1], -1)    # (B, T, D)
        outputs = self.norm(self.dense(context) + hidden_states)
        summed = torch.sum(outputs * attention_mask[:, :, None], dim=1)              # (B, D)
        if self.bug == "global-mask-sum":
            return summed / torch.sum(attention_mask)                                # [pool]
        return summed / torch.sum(attention_mask, dim=1, keepdim=True)               # [pool]


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    attention_mask = torch.ones(B, T)
    attention_mask[1, -2:] = 0.0                                               # the second sentence padded by two
    return BertLayerAvg(D, H, bug).eval(), (torch.randn(B, T, D), attention_mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
