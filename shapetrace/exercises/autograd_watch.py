"""Whether a hand-written backward asked autograd instead: one TorchFunctionMode around the learner's call.

Runs in the checker's child. A write-a-backward exercise (its exercise.toml gives ``autograd``: it is
judged against autograd itself) asks for the gradient worked out by hand from dy. The child calls the
learner's function under ``torch.no_grad()``, and, for these exercises, inside :class:`AutogradWatch`: a
TorchFunctionMode on top of the stack, which sees every torch call the function makes (in torch 2.13 a
mode makes ``has_torch_function`` true for every call, so ``torch.autograd.grad``, ``Tensor.backward``,
``requires_grad_``, the ``requires_grad`` setter, ``torch.enable_grad()`` and every op come to it). After
each call it reads the autograd state of the tensors the call took and returned:

* a ``grad_fn``: autograd recorded an op for its backward (``autograd.grad``, ``.backward()``,
  ``torch.func.grad``/``vjp``/``jacrev`` and ``torch.autograd.functional`` all need one);
* a forward-mode tangent (``torch.autograd.forward_ad``, ``torch.func.jvp``/``jacfwd``).

The first call that shows either is kept as ``[line, code, what]`` (the learner's line, its text, and
what it showed); the parent's judge turns it into the ``uses-autograd`` verdict. No function's name
decides anything. A leaf that only requires grad, with no op recorded on it, is no use of autograd and
is not reported.

An exercise rule, not containment (the kernel's sandbox is that). It runs in the learner's own process,
so it does not see code that leaves the mode (``torch._C.DisableTorchFunction()``, popping torch's mode
stack), autograd run from TorchScript or a C extension, or a file that finds the watch and switches it
off; nor a gradient found by finite differences, which uses no autograd at all.
"""

from __future__ import annotations

import linecache
import sys

import torch
from torch.overrides import TorchFunctionMode

#: Tensors read per call (a call that takes or returns more is read only this far).
MAX_TENSORS = 64


class AutogradWatch(TorchFunctionMode):
    """Keeps the first torch call of the learner's file at ``path`` whose tensors carry autograd state."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.found: list | None = None   # [line or None, code, what]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = None
        try:
            result = func(*args, **kwargs)
            return result
        finally:
            if self.found is None:
                what = autograd_state((args, kwargs, result))
                if what:
                    self.found = [*self._learner_line(), what]

    def _learner_line(self) -> tuple[int | None, str]:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.path:
                return frame.f_lineno, linecache.getline(self.path, frame.f_lineno).strip()
            frame = frame.f_back
        return None, ""


def autograd_state(value) -> str:
    """What shows autograd at work in ``value`` (tensors inside tuples, lists and dicts), in words;
    "" when nothing does. Read with torch functions off, so a tensor subclass runs none of its code."""
    with torch._C.DisableTorchFunction():
        for t in _tensors(value):
            try:
                if t.grad_fn is not None:
                    return f"made a tensor autograd records for its backward (grad_fn {type(t.grad_fn).__name__})"
                if torch._VF._unpack_dual(t, 0).tangent is not None:
                    return "made a tensor that carries a forward-mode tangent (forward-mode autograd)"
            except Exception:   # a tensor whose state cannot be read says nothing
                continue
    return ""


def _tensors(value, depth: int = 0) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    stack = [(value, depth)]
    while stack and len(found) < MAX_TENSORS:
        item, level = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif level < 4 and isinstance(item, (tuple, list)):
            stack += [(x, level + 1) for x in item[:MAX_TENSORS]]
        elif level < 4 and isinstance(item, dict):
            stack += [(x, level + 1) for x in list(item.values())[:MAX_TENSORS]]
    return found
