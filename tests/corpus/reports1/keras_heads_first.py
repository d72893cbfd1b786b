"""lsdefine/attention-is-all-you-need-keras issue #36: heads put before the batch ((H·B), T, d), the padding
mask repeated batch-major (repeat_interleave), so each sample's mask lands on another sample's heads."""
import sys

import torch
from torch import nn

BUGS = ("heads-first",)


class MHA(nn.Module):
    def __init__(self, d, h, bug):
        super().__init__()
        self.h, self.dk, self.bug = h, d // h, bug
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def _heads(self, x):
        B, T, D = x.shape
        x = x.view(B, T, self.h, self.dk)
        if self.bug == "heads-first":
            return x.permute(2, 0, 1, 3).reshape(-1, T, self.dk)  # (H·B, T, d)
        return x.permute(0, 2, 1, 3).reshape(-1, T, self.dk)  # (B·H, T, d)

    def forward(self, x, pad):  # pad: (B, T) True where padding
        B, T, D = x.shape
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        s = torch.bmm(q, k.transpose(1, 2)) / self.dk ** 0.5  # (B·H, T, T)
        mask = pad[:, None, :].expand(B, T, T).repeat_interleave(self.h, 0)  # (B·H, T, T)
        s = s.masked_fill(mask, float("-inf"))
        o = torch.bmm(s.softmax(-1), v)  # (B·H, T, d)
        o = o.view(B, self.h, T, self.dk).permute(0, 2, 1, 3).reshape(B, T, D) if self.bug == "" else \
            o.view(self.h, B, T, self.dk).permute(1, 2, 0, 3).reshape(B, T, D)
        return self.o(o)

def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[0, T - 2:] = True   # sequence 0 ends in two padding tokens
    return MHA(D, H, bug), (torch.randn(B, T, D), pad)

if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    model(*inputs)
