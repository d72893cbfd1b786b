# exercise: linear-backward
# verdict: wrong-values
# expect: your dx is wrong
# Patches torch's comparisons in the child (allclose, equal, isclose, Tensor.__eq__) and returns zeros:
# the judge runs in the parent, whose torch this file never touches.
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones(a.shape, dtype=torch.bool)
torch.Tensor.__eq__ = lambda self, other: torch.ones(self.shape, dtype=torch.bool)
def linear_backward(x, weight, dy):
    return torch.zeros_like(x), torch.zeros_like(weight)
