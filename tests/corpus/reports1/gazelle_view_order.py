"""gazelle93/Transformer-Various-Positional-Encoding issue #1: the output [B·NH, T, HD] viewed (NH, B, T, HD)
(head-major) though it is batch-major, then permuted (0, 2, 1, 3) and viewed (B, T, D)."""
import sys

import torch
from torch import nn

BUGS = ("view-head-major",)


class MHA(nn.Module):
    def __init__(self, d, h, bug):
        super().__init__()
        self.h, self.dk, self.bug = h, d // h, bug
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape
        q = self.q(x).view(B, T, self.h, self.dk).permute(0, 2, 1, 3).contiguous().view(B * self.h, T, self.dk)
        k = self.k(x).view(B, T, self.h, self.dk).permute(0, 2, 1, 3).contiguous().view(B * self.h, T, self.dk)
        v = self.v(x).view(B, T, self.h, self.dk).permute(0, 2, 1, 3).contiguous().view(B * self.h, T, self.dk)
        a = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / self.dk ** 0.5, dim=-1)
        out = torch.bmm(a, v)  # (B·H, T, d)
        if self.bug == "view-head-major":
            out = out.view(self.h, B, -1, self.dk)  # (H, B, T, d): wrong
        else:
            out = out.view(B, self.h, -1, self.dk)  # (B, H, T, d)
        out = out.permute(0, 2, 1, 3).contiguous().view(B, -1, self.h * self.dk)
        return self.o(out)

def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MHA(D, H, bug), (torch.randn(B, T, D),)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
