"""lucidrains/slot-attention, slot_attention/slot_attention.py (``SlotAttention``, v1.1), the PyTorch port of
google-research/google-research slot_attention/model.py: slots drawn from ``slots_mu + slots_logsigma.exp() *
randn``, ``norm_input``, ``to_k``/``to_v`` once, then ``iters`` rounds of ``norm_slots``, ``to_q``, ``dots =
einsum('bid,bjd->bij', q, k) * scale``, ``attn = dots.softmax(dim=1) + eps`` (the softmax over the SLOTS, the
query axis: slots compete for each input, the method's point), ``attn / attn.sum(dim=-1, keepdim=True)`` (a
weighted mean over the inputs), ``updates = einsum('bjd,bij->bid', v, attn)``, a ``GRUCell`` over
``updates.reshape(-1, d)`` with ``slots_prev.reshape(-1, d)`` as its state, ``reshape(b, -1, d)`` and a
residual MLP. The noise is drawn from a seeded generator (here before the trace: ``build`` passes it in).

Bugs: ``gru-state-slot-major``: the GRU state flattened ``slots_prev.transpose(0, 1).reshape(-1, d)`` (slot-major
rows, the layout of a port that keeps slots first) against batch-major updates: each slot's state comes from
another image. Twin: ``softmax-over-inputs``: ``dots.softmax(dim=-1)`` (ordinary attention's axis; for slot
attention the slip that removes the competition between slots) is the standard reading of a scores tensor, so
nothing recorded tells it from a plain cross-attention: only the method's intent does."""

import sys

import torch
from torch import nn


class SlotAttention(nn.Module):
    def __init__(self, num_slots, dim, iters=2, eps=1e-8, hidden_dim=64, bug=""):
        super().__init__()
        self.bug = bug
        self.num_slots = num_slots
        self.iters = iters
        self.eps = eps
        self.scale = dim ** -0.5
        self.slots_mu = nn.Parameter(torch.randn(1, 1, dim))
        self.slots_logsigma = nn.Parameter(torch.zeros(1, 1, dim))
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.gru = nn.GRUCell(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden_dim), nn.ReLU(inplace=True), nn.Linear(hidden_dim, dim))
        self.norm_input = nn.LayerNorm(dim)
        self.norm_slots = nn.LayerNorm(dim)
        self.norm_pre_ff = nn.LayerNorm(dim)

    def forward(self, inputs, noise):
        b, n, d = inputs.shape
        mu = self.slots_mu.expand(b, self.num_slots, -1)
        sigma = self.slots_logsigma.exp().expand(b, self.num_slots, -1)
        slots = mu + sigma * noise
        inputs = self.norm_input(inputs)
        k, v = self.to_k(inputs), self.to_v(inputs)
        for _ in range(self.iters):
            slots_prev = slots
            slots = self.norm_slots(slots)
            q = self.to_q(slots)
            dots = torch.einsum("bid,bjd->bij", q, k) * self.scale
            attn = dots.softmax(dim=-1 if self.bug == "softmax-over-inputs" else 1) + self.eps
            attn = attn / attn.sum(dim=-1, keepdim=True)
            updates = torch.einsum("bjd,bij->bid", v, attn)
            if self.bug == "gru-state-slot-major":
                state = slots_prev.transpose(0, 1).reshape(-1, d)
            else:
                state = slots_prev.reshape(-1, d)
            slots = self.gru(updates.reshape(-1, d), state)
            slots = slots.reshape(b, -1, d)
            slots = slots + self.mlp(self.norm_pre_ff(slots))
        return slots


BUGS = ("gru-state-slot-major",)
TWINS = ("softmax-over-inputs",)
DIMS = ("B=2 T=6 D=32 S=3",)
EQUAL = {"B=2 T=6 D=32 S=3": "B=4 T=4 D=32 S=4"}


def build(bug="", B=2, T=6, D=32, S=3):
    torch.manual_seed(0)
    model = SlotAttention(S, D, bug=bug).eval()
    return model, (torch.randn(B, T, D), torch.randn(B, S, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
