"""torch's nn.MultiheadAttention with batch_first=True, fed [B, T, D], with a key padding mask."""

import torch
from torch import nn

SIZES = [
    {"B": 2, "T": 6, "D": 32, "H": 4},
    {"B": 2, "T": 4, "D": 16, "H": 4},   # T == H == d_k
    {"B": 4, "T": 4, "D": 8, "H": 2},    # B == T == d_k
]


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, heads, batch_first=True)
        self.ff = nn.Linear(d_model, d_model)

    def forward(self, x, key_padding_mask):
        y, weights = self.mha(x, x, x, key_padding_mask=key_padding_mask)        # (B, T, D), (B, T, T)
        out = self.ff(y)                                                         # (B, T, D) [out]
        first_query = weights[:, 0, :]                                           # (B, T) [first_query]
        return out, first_query


def build(dims):
    torch.manual_seed(0)
    B, T = dims["B"], dims["T"]
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[-1, T - 1] = True                                                        # True: a padded key
    return Block(dims["D"], dims["H"]).eval(), (torch.randn(B, T, dims["D"]), pad)
