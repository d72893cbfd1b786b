"""Copies of the values a recorded call keeps for the analysis, in memory lent again from one trace to the next.

An addition of two tensors may add a mask or a bias onto attention scores, which only the analysis after the
run can tell; so the capture keeps the smaller operand's values (:meth:`.capture.Capture.record_addition`).
Holding the operand itself kept every residual stream of a forward alive until the run ended, and each later
allocation then took fresh memory from the system: ~430 page faults per forward of the capture ladder's
D 256 model, ~15% of its recording. A copy taken at the call holds the values as they were added (later
in-place writes do not change what was added) and lets the operand go. The copies are made into buffers
that outlive their trace: a buffer no record holds any more (its trace is gone) is lent again to the next
copy of the same dtype and shape, so a model traced again and again copies into memory it already has.
"""

from __future__ import annotations

import sys

import torch

#: bytes of buffers kept for lending again once their trace is gone (beyond them, a copy is a plain clone)
POOL_BYTES = 16 << 20

_refcount = sys.getrefcount
_inference_mode = torch.is_inference_mode_enabled
_STRIDED, _TENSOR, _PARAMETER = torch.strided, torch.Tensor, torch.nn.Parameter


class KeptCopies:
    """Buffers by ``(dtype, shape, made under inference mode)``; one no record holds is lent again (its
    reference count says so).

    A buffer becomes free when the trace whose record holds it is gone, so while a trace records, each
    buffer is looked at once: ``searched`` counts, per key, the buffers found held (or lent) since the
    last :meth:`start`, and the next copy looks only past them (a trace that makes n copies of one
    shape looks at n buffers, not n²/2)."""

    def __init__(self) -> None:
        self.buffers: dict[tuple, list[torch.Tensor]] = {}
        self.pooled = 0
        self.searched: dict[tuple, int] = {}

    def start(self) -> None:
        """A trace starts: the buffers of traces gone since are looked at again."""
        self.searched.clear()

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """A copy of ``t``'s values (contiguous, detached), in a free buffer of its dtype and shape if
        there is one; ``t`` itself when it is not a plain strided tensor (a sparse one, a subclass)."""
        if t.layout is not _STRIDED or (type(t) is not _TENSOR and type(t) is not _PARAMETER):
            return t
        # (a buffer made under torch.inference_mode() is an inference tensor, which torch lets no code
        # outside that mode write: buffers are lent within the mode they were made in)
        key = (t.dtype, t.shape, _inference_mode())
        free = self.buffers.get(key)
        if free is not None:
            for i in range(self.searched.get(key, 0), len(free)):
                buf = free[i]
                if _refcount(buf) <= _FREE:   # (only this list and this name hold it: its trace is gone)
                    self.searched[key] = i + 1   # (lent now: held)
                    return buf.copy_(t.detach())   # (detached: no gradient recorded, as under no_grad)
        buf = t.detach().clone(memory_format=torch.contiguous_format)
        size = buf.numel() * buf.element_size()
        if self.pooled + size <= POOL_BYTES:
            self.pooled += size
            free = self.buffers.setdefault(key, [])
            free.append(buf)
        if free is not None:
            self.searched[key] = len(free)
        return buf


def _free_refs() -> int:
    """The reference count :meth:`KeptCopies.copy` sees for a buffer nothing else holds."""
    held = [object()]
    item = held[0]
    return _refcount(item)


_FREE = _free_refs()
#: the process's buffers (one trace at a time reads and lends them: the interpreter lock orders the calls)
KEPT = KeptCopies()
