"""rish-16/aft-pytorch issue #1 ("why sum(0)?", fixed by the author: "The patch has been made"): the
Attention Free Transformer's ``AFTSimple`` took ``torch.softmax(K, 0)`` and ``.sum(0)`` on ``(B, T, d)``
keys and values, so the weights were normalised and summed over the *batch* (every sample's context mixed
the other samples' tokens of the same position) instead of over the timesteps (the report: "it add the
timestep dimension from t=1 to T, so maybe it should be sum(2) here"). The fix: ``softmax(K, dim=1)`` and
``sum(dim=1, keepdim=True)``.

The idiom: aft-pytorch's ``AFTSimple`` (``to_q``/``to_k``/``to_v`` linears to a hidden width, ``view(B, T,
hidden)``, ``sigmoid(Q)`` gating the pooled context, ``project`` back), in a pre-norm residual block.

Bug (argument): ``sum-over-batch``: ``softmax(K, 0)`` and ``.sum(0)``."""

import sys

import torch
from torch import nn

BUGS = ("sum-over-batch",)
TWINS = ()
DIMS = ("B=2 T=6 D=32",)


class AFTSimple(nn.Module):
    def __init__(self, dim, hidden_dim, bug=""):
        super().__init__()
        self.hidden_dim, self.bug = hidden_dim, bug
        self.to_q = nn.Linear(dim, hidden_dim)
        self.to_k = nn.Linear(dim, hidden_dim)
        self.to_v = nn.Linear(dim, hidden_dim)
        self.project = nn.Linear(hidden_dim, dim)

    def forward(self, x):                                                       # (B, T, D)
        B, T, _ = x.shape
        Q = self.to_q(x).view(B, T, self.hidden_dim)
        K = self.to_k(x).view(B, T, self.hidden_dim)
        V = self.to_v(x).view(B, T, self.hidden_dim)
        if self.bug == "sum-over-batch":
            weights = torch.mul(torch.softmax(K, 0), V).sum(0)                  # [pool] (T, hidden)
        else:
            weights = torch.mul(torch.softmax(K, 1), V).sum(dim=1, keepdim=True)  # [pool] (B, 1, hidden)
        Q_sig = torch.sigmoid(Q)
        Yt = torch.mul(Q_sig, weights)                                          # (B, T, hidden)
        Yt = Yt.view(B, T, self.hidden_dim)
        return self.project(Yt)                                                 # (B, T, D)


class Block(nn.Module):
    def __init__(self, dim, bug=""):
        super().__init__()
        self.norm, self.aft = nn.LayerNorm(dim), AFTSimple(dim, dim, bug)

    def forward(self, x):
        return x + self.aft(self.norm(x))


def build(bug="", B=2, T=6, D=32):
    torch.manual_seed(0)
    return Block(D, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
