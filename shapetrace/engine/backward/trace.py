"""A :class:`~shapetrace.engine.tracer.Trace` that traces the backward too (``trace(backward=True)``).

The forward is recorded as by any trace; this subclass starts a :class:`~.session.BackwardSession` when
the block is entered (every recorded call's autograd nodes are claimed and hooked, every saved tensor
is seen) and, once the recorder is off, runs the backward (unless the block ran its own) and keeps
its report, read from :attr:`BackwardTrace.backward`.
"""

from __future__ import annotations

from collections.abc import Sequence

from shapetrace.engine.backward.rows import BackwardReport
from shapetrace.engine.backward.session import BackwardSession
from shapetrace.engine.diagnostic import SEVERITY_ORDER
from shapetrace.engine.tracer import Trace


class BackwardTrace(Trace):
    """A trace of the forward and of its backward.

    >>> import torch, shapetrace
    >>> w = torch.nn.Linear(8, 8)
    >>> with shapetrace.trace("B=2 T=3 D=8", backward=True) as t:
    ...     y = w(shapetrace.name(torch.ones(2, 3, 8), "B T D"))
    >>> row = t.backward.rows[0]
    >>> row.op, [(g.of, g.dims) for g in row.made]
    ('linear', [('bias', ('D',)), ('weight', ('D', 'D'))])
    """

    def __init__(self, dims: dict[str, int] | None = None, seed_order: Sequence[str] | None = None):
        super().__init__(dims, seed_order)
        self._session = BackwardSession(self.capture)
        self.loss = None   # the scalar whose backward runs when the block ran none (default: the last result's sum)

    def __enter__(self) -> BackwardTrace:
        entered = super().__enter__()
        self._session.start()
        return entered

    def __exit__(self, exc_type, exc, tb) -> None:
        super().__exit__(exc_type, exc, tb)   # (the recorder is off: the backward's own calls are not recorded)
        self._session.end(exc, self.loss)

    def stopped(self, reason: str) -> None:
        """The block was stopped on purpose (``the recording stopped at --max-ops 10``): the backward's note
        says so, not that the block raised."""
        self._session.stopped(reason)

    @property
    def diagnostics(self):
        """The forward's findings and the backward's (:mod:`.checks`), errors first."""
        found = super().diagnostics
        if not self._finished:
            return found
        extra = self._session.findings(self._inferred())
        return sorted([*found, *extra], key=lambda d: SEVERITY_ORDER[d.severity]) if extra else found

    @property
    def backward(self) -> BackwardReport:
        """The backward pass (:class:`~.rows.BackwardReport`), read once the block has ended."""
        return self._session.report(self._inferred())
