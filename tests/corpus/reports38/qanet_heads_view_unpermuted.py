"""hackiey/QAnet-pytorch issue #2 ("A possible bug in self_attention.py", labelled bug; hackiey: "actually you are
right, we should permute the heads first, and the reason of not changed result is the heads number is 1"): the
heads were collected in ``torch.zeros(n_heads, batch_size, l, value_dim)`` and concatenated with
``heads.view(batch_size, l, -1)``: a heads-first ``[H, B, T, d]`` buffer read as batch-first, so each row of the
output holds other tokens' (and other samples') heads. The fix: ``heads.permute(1, 2, 0, 3).contiguous()
.view(batch_size, l, -1)``.

The idiom (QANet's ``SelfAttention``, ported as is, inside its encoder block): per-head ``nn.ModuleList``s of
``Linear(n_filters, key_dim)`` for the queries, keys and values, the key padding mask
``mask.unsqueeze(-1).expand(B, L, L).permute(0, 2, 1)``, a loop over the heads writing
``heads[i] = torch.bmm(softmax(bmm(Q, K.permute(0, 2, 1)) / sqrt(key_dim) - 1e30 * (1 - mask)), V)``, the
concatenation, ``fc_out``; the block's layer norm and residual, over a batch whose rows have 2 and 1 padding
positions.

Bug (argument): ``view-unpermuted``: the heads buffer concatenated with ``heads.view(batch_size, l, -1)``
(``l`` spelled ``seq_len`` here)."""

import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("view-unpermuted",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class SelfAttention(nn.Module):
    def __init__(self, n_heads=8, n_filters=128, bug=""):
        super().__init__()
        self.n_filters, self.n_heads, self.bug = n_filters, n_heads, bug
        self.key_dim = n_filters // n_heads
        self.value_dim = n_filters // n_heads
        self.fc_query = nn.ModuleList([nn.Linear(n_filters, self.key_dim) for _ in range(n_heads)])
        self.fc_key = nn.ModuleList([nn.Linear(n_filters, self.key_dim) for _ in range(n_heads)])
        self.fc_value = nn.ModuleList([nn.Linear(n_filters, self.value_dim) for _ in range(n_heads)])
        self.fc_out = nn.Linear(n_heads * self.value_dim, n_filters)

    def forward(self, x, mask):
        batch_size = x.shape[0]
        seq_len = x.shape[1]
        mask = mask.unsqueeze(-1).expand(x.shape[0], x.shape[1], x.shape[1]).permute(0, 2, 1)   # (B, T, T)
        heads = torch.zeros(self.n_heads, batch_size, seq_len, self.value_dim)          # (H, B, T, d)
        for i in range(self.n_heads):
            Q = self.fc_query[i](x)                                                      # (B, T, d)
            K = self.fc_key[i](x)
            V = self.fc_value[i](x)
            tmp = torch.bmm(Q, K.permute(0, 2, 1))                                       # (B, T, T)
            tmp = tmp / np.sqrt(self.key_dim)
            tmp = F.softmax(tmp - 1e30 * (1 - mask), dim=-1)
            tmp = F.dropout(tmp, p=0.1, training=self.training)
            heads[i] = torch.bmm(tmp, V)                                                 # (B, T, d)
        if self.bug == "view-unpermuted":
            x = heads.view(batch_size, seq_len, -1)                                      # (B, T, D)
        else:
            x = heads.permute(1, 2, 0, 3).contiguous().view(batch_size, seq_len, -1)    # (B, T, D)
        return self.fc_out(x)


class EncoderBlock(nn.Module):
    def __init__(self, n_filters, n_heads, bug=""):
        super().__init__()
        self.norm = nn.LayerNorm(n_filters)
        self.self_attention = SelfAttention(n_heads, n_filters, bug)
        self.norm_ff = nn.LayerNorm(n_filters)
        self.ff = nn.Sequential(nn.Linear(n_filters, n_filters), nn.ReLU(), nn.Linear(n_filters, n_filters))

    def forward(self, x, mask):
        x = x + self.self_attention(self.norm(x), mask)
        return x + self.ff(self.norm_ff(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    lengths = torch.tensor([T - 2, T - 1] * B)[:B]
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()                        # (B, T): 1 = real
    return EncoderBlock(D, H, bug).eval(), (torch.randn(B, T, D), mask)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
