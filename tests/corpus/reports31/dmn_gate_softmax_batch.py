"""therne/dmn-tensorflow issue #6 ("softmax in def attention() is wrong?"; the reporter, daxiongshu: "``l2 =
tf.nn.softmax(l2)`` is performed on batch/N dimension but in paper [DMN+, formula (10)] the softmax should be
performed on Fact/F dimension"; a second user: "Yes. In the paper..."): the Dynamic Memory Network's episodic
module scored each fact against the question and the memory and normalised the gate of each fact across the
*batch* (``N``), one fact at a time, where the gates of one example must be normalised across its facts; the
reporter's fix packs the gates of all facts, ``softmax(gs, dim=0)`` over the facts, and unpacks them.

The idiom (written here in PyTorch, as the DMN+ ports do): the facts sequence-first ``(F, N, D)``, the
question ``(N, D)``; per fact the interaction features ``[f * q, f * m, |f - q|, |f - m|]``, a two-layer
``tanh`` MLP to one score per example; the scores of all facts stacked ``(F, N)`` and softmaxed over the facts;
the attention GRU (``h = g * GRUCell(f, h) + (1 - g) * h``) over the facts gives the episode, and a GRU
cell updates the memory from the episode; two passes; the answer is ``Linear([m, q])``.

Bug (softmax axis): ``gate-softmax-over-batch``: each fact's gate softmaxed across the batch."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

BUGS = ("gate-softmax-over-batch",)
TWINS = ()
DIMS = ("B=3 T=6 D=32",)
PASSES, ANSWERS = 2, 11


class EpisodicMemory(nn.Module):
    def __init__(self, hidden, bug=""):
        super().__init__()
        self.bug = bug
        self.z1 = nn.Linear(4 * hidden, hidden)
        self.z2 = nn.Linear(hidden, 1)
        self.attn_gru = nn.GRUCell(hidden, hidden)
        self.memory_gru = nn.GRUCell(hidden, hidden)

    def gate_scores(self, facts, question, memory):
        q, m = question.unsqueeze(0), memory.unsqueeze(0)                                   # (1, N, D)
        z = torch.cat([facts * q, facts * m, torch.abs(facts - q), torch.abs(facts - m)], dim=2)  # (F, N, 4D)
        return self.z2(torch.tanh(self.z1(z))).squeeze(2)                                   # (F, N)

    def forward(self, facts, question, memory):
        scores = self.gate_scores(facts, question, memory)                                  # (F, N)
        if self.bug == "gate-softmax-over-batch":
            gates = torch.stack([F.softmax(s, dim=0) for s in scores.unbind(0)])            # (F, N)
        else:
            gates = F.softmax(scores, dim=0)                                                # (F, N)
        state = torch.zeros_like(question)
        for fact, g in zip(facts.unbind(0), gates.unbind(0)):
            g = g.unsqueeze(1)                                                              # (N, 1)
            state = g * self.attn_gru(fact, state) + (1 - g) * state
        return self.memory_gru(state, memory)


class DMN(nn.Module):
    def __init__(self, hidden, bug=""):
        super().__init__()
        self.episodic = EpisodicMemory(hidden, bug=bug)
        self.answer = nn.Linear(2 * hidden, ANSWERS)

    def forward(self, facts, question):
        memory = question
        for _ in range(PASSES):
            memory = self.episodic(facts, question, memory)
        return self.answer(torch.cat([memory, question], dim=1))


def build(bug="", B=3, T=6, D=32):
    torch.manual_seed(0)
    return DMN(D, bug=bug).eval(), (torch.randn(T, B, D), torch.randn(B, D))


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
