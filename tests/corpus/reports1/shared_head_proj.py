"""MarcoMeter/episodic-transformer-memory-ppo PR #22: the input split into heads first, then one shared
nn.Linear(head_dim, head_dim) projects every head: head h's query sees only its own slice of the features."""
import sys

import torch
from torch import nn

BUGS = ("split-then-project",)


class MHA(nn.Module):
    def __init__(self, d, h, bug):
        super().__init__()
        self.h, self.dk, self.bug = h, d // h, bug
        if bug == "split-then-project":
            self.q, self.k, self.v = (nn.Linear(self.dk, self.dk, bias=False) for _ in range(3))
        else:
            self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.o = nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        if self.bug == "split-then-project":
            xs = x.reshape(B, T, self.h, self.dk)  # (B, T, H, d)
            q, k, v = self.q(xs), self.k(xs), self.v(xs)
        else:
            q = self.q(x).reshape(B, T, self.h, self.dk)
            k = self.k(x).reshape(B, T, self.h, self.dk)
            v = self.v(x).reshape(B, T, self.h, self.dk)
        e = torch.einsum("nqhd,nkhd->nhqk", q, k)  # (B, H, T, T)
        a = torch.softmax(e / self.dk ** 0.5, dim=3)
        out = torch.einsum("nhql,nlhd->nqhd", a, v).reshape(B, T, D)
        return self.o(out)

def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return MHA(D, H, bug), (torch.randn(B, T, D),)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
