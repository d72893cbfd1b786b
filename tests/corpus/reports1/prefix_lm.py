"""A prefix LM's mask (THUDM/GLM's ``build_mask_matrix``; transformers' PaliGemma ``token_type_ids`` prefix):
tril(ones) with the first ``sep`` columns opened, so the prefix tokens see one another both ways and the rest
is causal. Correct code: the "leak" within the prefix is the design."""
import sys

import torch
from torch import nn

BUGS = ()


class PrefixAttn(nn.Module):
    def __init__(self, d, h, sep):
        super().__init__()
        self.h, self.dk, self.sep = h, d // h, sep
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q = q.view(B, T, self.h, self.dk).transpose(1, 2)  # (B, H, T, d)
        k = k.view(B, T, self.h, self.dk).transpose(1, 2)  # (B, H, T, d)
        v = v.view(B, T, self.h, self.dk).transpose(1, 2)  # (B, H, T, d)
        m = torch.ones(T, T, device=x.device).tril()
        m[:, : self.sep] = 1
        s = (q @ k.transpose(-2, -1)) / self.dk ** 0.5
        s = s.masked_fill(m == 0, float("-inf"))
        o = s.softmax(-1) @ v  # (B, H, T, d)
        return self.o(o.transpose(1, 2).reshape(B, T, D))

def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return PrefixAttn(D, H, 3), (torch.randn(B, T, D),)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
