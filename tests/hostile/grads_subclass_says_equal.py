# exercise: head-backward
# verdict: wrong-values
# expect: your dq is wrong
# Zeros of the right shapes, in a tensor subclass whose __torch_function__ answers every comparison
# (==, eq, equal, allclose, isclose) with "equal": the parent compares plain tensors rebuilt from bytes.
import torch
class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("__eq__", "eq", "isclose"):
            return torch.ones(args[0].shape, dtype=torch.bool)
        if name in ("equal", "allclose"):
            return True
        return super().__torch_function__(func, types, args, kwargs)
def head_backward(q, k, v, dy):
    return tuple(torch.zeros_like(t).as_subclass(Agreeable) for t in (q, k, v))
