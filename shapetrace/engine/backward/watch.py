"""What the forward does that its backward will feel, noted while it runs: raw facts, judged later.

Three kinds of facts, each noted by :meth:`Watch.note` after a recorded call returns (the backward
session calls it with every tensor the call was given, not only its recorded operands: a linear's
weight too):

* **cuts** — a call given a tensor that requires grad whose floating results do not: ``.detach()``,
  any op run with gradients off (``torch.no_grad()``), an op outside autograd. The tensors that fed
  it are kept (their autograd nodes), so that a parameter that gets no gradient can be traced to the
  cut that took it out of the graph;
* **reads outside autograd** — the first call that read each storage through a floating tensor that
  does not require grad (``w.data``, ``w.detach()``: a parameter's memory, read where autograd cannot
  see it; a write into it, such as an initialiser's ``w.data.normal_()``, is not a read);
* **in-place writes** — each call that writes into its first operand (or returns it), with that
  operand's storage and version after the call, so that a saved tensor found overwritten can be tied
  to the call that wrote it.

Nothing here is judged: :mod:`.checks` turns the facts into findings.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from shapetrace.engine.ops import all_operands
from shapetrace.engine.sites import site


class Cut(NamedTuple):
    """A call whose results left autograd's graph although a tensor it was given requires grad."""

    record: int
    feeding: tuple          # the autograd node (or the leaf tensor itself) of each tensor that requires grad
    where: Any              # its call site (:class:`~shapetrace.engine.sites.Site`), or None
    grad_on: bool           # whether gradients were on when it ran (off: a ``torch.no_grad()`` block)


def storage_of(t: torch.Tensor) -> int:
    """The address of the memory ``t`` lives in (0 for a tensor without data)."""
    return t.untyped_storage().data_ptr()


class Watch:
    """The cuts, reads outside autograd and in-place writes of one traced forward."""

    def __init__(self, records: list) -> None:
        self.records = records              # the capture's records (read by index, never written)
        self.cuts: list[Cut] = []
        self.reads: dict[int, int] = {}     # storage -> the first record that read it outside autograd
        self.writes: list[tuple[int, int, int]] = []   # (record, storage written into, its version after)

    def note(self, record: int, outputs, args, kwargs) -> None:
        """Call ``record`` returned ``outputs`` from ``args``/``kwargs``: note what the backward will feel."""
        tensors = all_operands(args, kwargs)
        if not tensors:
            return
        first = tensors[0]
        writes = self.records[record].spec.writes_in_place or bool(outputs) and outputs[0] is first
        if writes:   # (an op that returns its operand: dropout(inplace=True), or a no-op, told by the version)
            self.writes.append((record, storage_of(first), first._version))
        feeding = [t for t in tensors if t.requires_grad]
        floats = [o for o in outputs if o.is_floating_point()]
        if feeding and floats and not any(o.requires_grad for o in floats):
            self.cuts.append(Cut(record, tuple(t if t.grad_fn is None else t.grad_fn for t in feeding),
                                 site(1), torch.is_grad_enabled()))
        for t in tensors[1:] if writes else tensors:   # (writing into w.data, as an initialiser does, is no read)
            if not t.requires_grad and t.is_floating_point():
                self.reads.setdefault(storage_of(t), record)

    def writer_of(self, storage: int, after: int, version: int) -> int | None:
        """The first call after record ``after`` that wrote in place into ``storage``, leaving it past
        ``version`` (a call that returned its operand untouched is no write); None: none recorded."""
        return next((r for r, s, v in self.writes if r > after and s == storage and storage and v > version), None)

    def cut_of(self, parameter: torch.Tensor) -> Cut | None:
        """The first cut fed by ``parameter`` (through any chain of autograd nodes), or None."""
        for cut in self.cuts:
            if any(parameter is leaf for root in cut.feeding for leaf in leaves_of(root)):
                return cut
        return None

    def release(self) -> None:
        """Let the autograd nodes go (the facts that name records stay)."""
        self.cuts = [c._replace(feeding=()) for c in self.cuts]


def leaves_of(root) -> list[torch.Tensor]:
    """The leaf tensors (parameters, inputs that require grad) an autograd node's graph reaches; a leaf
    tensor is its own."""
    if isinstance(root, torch.Tensor):
        return [root]
    found, seen, todo = [], {root}, [root]
    while todo:
        node = todo.pop()
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.append(variable)
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                todo.append(child)
    return found
