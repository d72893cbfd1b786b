"""What autograd keeps for the backward: every saved tensor, from ``saved_tensors_hooks``.

While the forward runs, :class:`SavedTensors` is the pack hook of
``torch.autograd.graph.saved_tensors_hooks``: each tensor autograd saves is packed with a small
:class:`Packed` handle holding its facts (shape, strides, bytes, storage) and the capture's node for it
(so its axis names are the forward's). Which autograd node saved it is learnt afterwards, before the
backward frees them: reading a node's ``_saved_<name>`` attribute unpacks the tensor through our unpack
hook, which notes the handle (:meth:`SavedTensors.tie`).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch


class Packed:
    """One saved tensor, as autograd saved it (its facts read at save time)."""

    __slots__ = ("index", "tensor", "node", "shape", "stride", "offset", "dtype", "nbytes", "storage",
                 "storage_bytes", "saver", "parameter", "version", "made_at", "output_of",
                 "__weakref__")

    def __init__(self, index: int, tensor: torch.Tensor, node: int | None, made_at: int = -1):
        self.index, self.tensor, self.node = index, tensor, node
        self.version = tensor._version    # what autograd compares with the tensor's version when unpacking
        self.made_at = made_at            # the record being made when it was saved (the saver's)
        self.output_of = (tensor.grad_fn, tensor.output_nr)   # its own node: the saver's, if saved as its output
        self.shape, self.stride, self.offset = tuple(tensor.shape), tensor.stride(), tensor.storage_offset()
        self.dtype = str(tensor.dtype).removeprefix("torch.")
        self.nbytes = tensor.numel() * tensor.element_size()
        storage = tensor.untyped_storage()
        self.storage, self.storage_bytes = storage.data_ptr(), storage.nbytes()
        self.saver: Any = None            # the autograd node that saved it (:meth:`SavedTensors.tie`)
        self.parameter = isinstance(tensor, torch.nn.Parameter) or tensor._base is not None and \
            isinstance(tensor._base, torch.nn.Parameter)


class SavedTensors:
    """The pack and unpack hooks, and every tensor they saw saved."""

    def __init__(self, node_of, clock=lambda: -1) -> None:
        self.node_of = node_of            # tensor -> the capture's node for it, or None
        self.clock = clock                # () -> the index of the record being made
        self.packed: list[Packed] = []
        #: the record count when the first backward started: what is saved after it (a training loop's later
        #: steps) is watched through weak references only, so autograd frees it as it would untraced
        self.until: int | None = None
        self._later: list = []
        self._unpacked: list[Packed] = []
        self._context = None

    def pack(self, tensor: torch.Tensor) -> Packed:
        handle = Packed(len(self.packed), tensor, self.node_of(tensor), self.clock())
        if self.until is None:
            self.packed.append(handle)
        else:
            self._later.append(weakref.ref(handle))
        return handle

    def unpack(self, handle: Packed) -> torch.Tensor:
        """Autograd unpacks a saved tensor. With hooks, autograd does not compare versions itself (an
        in-place write after the save goes unnoticed): the session checks them as each backward starts."""
        self._unpacked.append(handle)
        return handle.tensor

    def overwritten(self) -> list[Packed]:
        """The saved tensors (still held by autograd) written in place since it saved them, their saver known."""
        self._later = [ref for ref in self._later if ref() is not None]
        found = [h for h in (*self.packed, *(ref() for ref in self._later)) if h is not None and
                 h.tensor is not None and h.saver is not None and h.tensor._version != h.version]
        for h in found:
            if h.node is None:
                h.node = self.node_of(h.tensor)
        return found

    def __enter__(self) -> SavedTensors:
        self._context = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)
        self._context = None

    def tie(self, nodes) -> None:
        """Find which of ``nodes`` saved each tensor (by unpacking each node's saved tensors once), and
        the capture's node of each saved tensor the forward recorded only after it was saved (a result
        its own op saves, as softmax saves its weights)."""
        for handle in self.packed:
            if handle.node is None:
                handle.node = self.node_of(handle.tensor)
        for node in nodes:
            for attr in dir(node):
                if not attr.startswith("_raw_saved_"):
                    continue
                self._unpacked.clear()
                try:
                    getattr(node, "_saved_" + attr.removeprefix("_raw_saved_"))
                except RuntimeError:   # (already freed: a backward ran)
                    continue
                for handle in self._unpacked:
                    if handle.saver is None:
                        handle.saver = node
        self._unpacked.clear()

    def release(self) -> None:
        """Let the tensors go (their facts stay on each :class:`Packed`)."""
        for handle in self.packed:
            handle.tensor = None
            handle.saver = None
            handle.output_of = (None, 0)
