"""One trace's backward: installed when the trace starts, run when it ends, read once after.

:class:`BackwardSession` joins :mod:`.graph` (the nodes each record made, hooked) and :mod:`.saved`
(every saved tensor). :class:`~.trace.BackwardTrace` calls :meth:`start` once its recorder is on (from
then the capture calls :meth:`note` after each call it records), :meth:`end` once it is off (which runs
the backward of the sum of the last result, unless the traced code ran its own), and :meth:`report`.
"""

from __future__ import annotations

from shapetrace.engine.backward.build import build_report
from shapetrace.engine.backward.graph import GradGraph
from shapetrace.engine.backward.rows import BackwardReport
from shapetrace.engine.backward.saved import SavedTensors


class BackwardSession:
    """The backward of one trace: its graph, its saved tensors, its report once built."""

    def __init__(self, capture) -> None:
        self.capture = capture
        self.graph = GradGraph()
        self.saved = SavedTensors(capture.known_node)
        self.param_names: dict[int, str] = {}
        self.failure: str | None = None
        self._report: BackwardReport | None = None

    def note(self, record: int, outputs, operands) -> None:
        """The capture recorded call ``record``: its results ``outputs`` from ``operands``."""
        self.graph.note(record, outputs, operands)

    def start(self) -> None:
        """The trace starts: note each recorded call's nodes, hook every saved tensor."""
        self.capture.grads = self
        self.saved.__enter__()

    def end(self, exc: BaseException | None) -> None:
        """The trace ends: stop noting; unless the block raised, run the backward (:meth:`finish`)."""
        self.saved.__exit__(None, None, None)
        self.capture.grads = None
        if exc is None:
            self.finish()
        else:
            self.failure = "no backward ran: the traced block raised"

    def finish(self, loss=None) -> None:
        """After the forward: tie each saved tensor to its node, name the parameters, run the backward."""
        self.saved.tie(self.graph.owner)
        self.param_names = _parameter_names(self.capture)
        try:
            self.graph.run_backward(loss)
        except RuntimeError as exc:   # (an in-place write autograd refuses, a second backward...)
            self.failure = f"the backward failed: {type(exc).__name__}: {exc}"

    def report(self, inference) -> BackwardReport:
        """The backward as plain data (built once: the gradients and saved tensors are let go then)."""
        if self._report is None:
            report = build_report(self.graph, self.saved, self.capture, inference, self.param_names)
            if self.failure is not None:
                report = BackwardReport(report.rows, report.params, report.saved,
                                        note=self.failure)
            self._report = report
            self.graph.release()
            self.saved.release()
        return self._report


def _parameter_names(capture) -> dict[int, str]:
    """``id(parameter) -> "w_q.weight"``, relative to each outermost module the traced code called."""
    names: dict[int, str] = {}
    for module, parent in capture.module_calls.first:
        if parent == -1:
            for name, p in module.named_parameters():
                names.setdefault(id(p), name)
    return names
