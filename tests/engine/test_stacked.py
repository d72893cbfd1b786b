"""engine/stacked.py: the axis a ``stack`` makes needs no name where it is only reduced along again, over
operands that agree (timm's parallel blocks: ``torch.stack([attn(x) for attn in self.attns]).sum(dim=0)``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace


class _Parallel(nn.Module):
    """Two branches side by side, stacked on a new axis at ``dim`` and reduced along ``along`` (timm's
    ``ParallelScalingBlock`` / ``vit_small_patch16_18x2``); ``flip`` transposes the second branch's output."""

    def __init__(self, d=8, reduce="sum", dim=0, along=None, flip=False, weights=False):
        super().__init__()
        self.branches = nn.ModuleList([nn.Linear(d, d), nn.Linear(d, d)])
        self.reduce, self.dim, self.along, self.flip = reduce, dim, dim if along is None else along, flip
        self.weights = nn.Parameter(torch.ones(2)) if weights else None

    def forward(self, x):                                                          # (B, T, D)
        outs = [branch(x) for branch in self.branches]                             # 2 × (B, T, D)
        if self.flip:
            outs[1] = outs[1].transpose(1, 2)                                      # (B, D, T): the bug
        stacked = torch.stack(outs, dim=self.dim)                                  # (2, B, T, D) at dim 0
        if self.weights is not None:   # the Feedback Transformer's bug: [2, 1, 1] lines up with B, not the stack
            stacked = stacked * self.weights.softmax(-1).view(2, 1, 1)             # (2, B, T, D)
        return x + getattr(stacked, self.reduce)(dim=self.along)                   # (B, T, D)


def _line(T: int, **kwargs) -> str:
    with torch.no_grad(), shapetrace.trace(dims=f"B=2 T={T} D=8") as t:
        _Parallel(**kwargs)(shapetrace.name(torch.randn(2, T, 8), "B T D"))
    return t.report().verdict.line


@pytest.mark.parametrize("kwargs", [{}, {"reduce": "mean", "dim": -1}, {"reduce": "amax", "dim": 1}])
def test_a_stack_reduced_along_the_axis_it_made_needs_no_name_for_it(kwargs):
    """Fails on 5afe940 (``? checked 2 of 4 ops …; not checked (unnamed axes): #2 stack, #3 sum``): the sum of
    the stacked branches is ``a + b``, each output element the same place in both."""
    assert _line(6, **kwargs).startswith("✓ checked all 4 ops")


@pytest.mark.parametrize("kwargs", [{"flip": True}, {"along": 1}, {"weights": True}])
def test_a_stack_of_operands_that_disagree_or_reduced_along_another_axis_keeps_needing_a_name(kwargs):
    """Its twins: the second branch transposed at T = D (its tokens added to the first one's features: the stack
    names them as the first operand's, so only the disagreeing operands show it), the sum taken over the batch,
    or the stack weighed by a call without a row before the sum (``stacked * w.view(2, 1, 1)``, whose weights
    line up with the batch: tests/corpus/reports22/feedback_layer_weight_axes.py): never ``✓``."""
    assert _line(8, **kwargs)[0] != "✓"
