"""One trace's backward: installed when the trace starts, run when it ends, read once after.

:class:`BackwardSession` joins :mod:`.graph` (the nodes each record made, hooked) and :mod:`.saved`
(every saved tensor). :class:`~.trace.BackwardTrace` calls :meth:`start` once its recorder is on (from
then the capture calls :meth:`note` after each call it records), :meth:`end` once it is off (which runs
the backward of the sum of the last result, unless the traced code ran its own), and :meth:`report`.
"""

from __future__ import annotations

import torch

from shapetrace.engine.backward import checks
from shapetrace.engine.backward.build import build_report
from shapetrace.engine.backward.graph import GradGraph
from shapetrace.engine.backward.rows import BackwardReport
from shapetrace.engine.backward.saved import SavedTensors
from shapetrace.engine.backward.watch import Watch, storage_of


class BackwardSession:
    """The backward of one trace: its graph, its saved tensors, its report once built."""

    def __init__(self, capture) -> None:
        self.capture = capture
        self.graph = GradGraph(on_start=self._before_backward)
        self.saved = SavedTensors(capture.known_node, lambda: len(capture.records))
        self.watch = Watch(capture.records)
        self.param_names: dict[int, str] = {}
        self.parameters: list = []     # (name, parameter) of the modules the traced code called
        self.failure: str | None = None
        self.raised = False            # the traced block raised (or was stopped) before its end
        self.stop_reason: str | None = None   # why it stopped, where the caller knows (:meth:`stopped`)
        self.refusals: list[checks.Refusal] = []
        self._tied = 0                 # the claims whose nodes' saved tensors are tied to them
        #: records made while other saved-tensor hooks sat above ours (torch.utils.checkpoint's): their nodes'
        #: saved tensors are never unpacked to tie them (a checkpoint's unpack recomputes, once only)
        self._foreign: set[int] = set()
        self._report: BackwardReport | None = None
        self._findings: list = []

    def note(self, record: int, outputs, operands, args=(), kwargs=None) -> None:
        """The capture recorded call ``record``: its results ``outputs`` from ``operands`` (of ``args``)."""
        self.graph.note(record, outputs, operands)
        self.watch.note(record, outputs, args, kwargs or {})
        top = torch._C._autograd._top_saved_tensors_default_hooks(False)
        if top is None or top[0] != self.saved.pack:
            self._foreign.add(record)

    def _tie(self) -> None:
        """Tie each saved tensor to the node that saved it, for the nodes claimed since the last time."""
        claims = self.graph.claims
        self.saved.tie([node for claim in claims[self._tied:] if claim.record not in self._foreign
                        for node in claim.nodes])
        self._tied = len(claims)

    def _before_backward(self) -> None:
        """A backward starts: refuse it, as torch would untraced, if a saved tensor it needs was written
        in place since it was saved (under saved-tensor hooks torch does not check this itself)."""
        self._tie()
        if self.graph.runs == 1:
            self.saved.until = len(self.capture.records)
        will_run = torch._C._will_engine_execute_node
        stale = [h for h in self.saved.overwritten() if will_run(h.saver)]
        if not stale:
            return
        for h in stale:
            claim = self.graph.owner.get(h.saver)
            self.refusals.append(checks.Refusal(
                h.node, h.shape, h.saver.name(), None if claim is None else self.graph.claims[claim].record,
                self.watch.writer_of(h.storage, h.made_at, h.version), h.version, h.tensor._version))
        self.failure = f"the backward failed: RuntimeError: {checks.refusal_text(stale[0])}"
        raise RuntimeError(checks.refusal_text(stale[0]))

    def start(self) -> None:
        """The trace starts: note each recorded call's nodes, hook every saved tensor."""
        self.capture.grads = self
        self.saved.__enter__()

    def end(self, exc: BaseException | None, loss=None) -> None:
        """The trace ends: stop noting; unless the block raised, run the backward (:meth:`finish`) of
        ``loss`` (default: the last result's sum), unless the block ran its own. A backward the block ran
        before it raised is kept (and none is run)."""
        self.saved.__exit__(None, None, None)
        self.capture.grads = None
        self.raised = exc is not None
        if exc is None or self.graph.steps:
            self.finish(loss)

    def stopped(self, reason: str) -> None:
        """The block was stopped by its caller (``the recording stopped at --max-ops 10``), not by an error."""
        self.stop_reason = reason

    def _note(self) -> str | None:
        """What the report says of a backward that failed, or of a block that did not reach its end."""
        if self.failure is not None or not self.raised:
            return self.failure
        why = self.stop_reason or "the traced block raised"
        if self.graph.ran:
            return f"{why} after its backward ran: the rows are that backward's"
        return f"no backward ran: {why}"

    def finish(self, loss=None) -> None:
        """After the forward: tie each saved tensor to its node, name the parameters, run the backward."""
        self._tie()
        self.parameters = _parameters(self.capture)
        self.param_names = {id(p): name for name, p in self.parameters}
        try:
            self.graph.run_backward(loss)
        except RuntimeError as exc:   # (an in-place write autograd refuses, a second backward...)
            self.failure = f"the backward failed: {type(exc).__name__}: {exc}"

    def report(self, inference) -> BackwardReport:
        """The backward as plain data (built once: the gradients and saved tensors are let go then)."""
        if self._report is None:
            report = build_report(self.graph, self.saved, self.capture, inference, self.param_names)
            self._findings = self._check(inference, report)
            note = self._note()
            if note is not None:
                report = BackwardReport(report.rows, report.params, report.saved, note=note,
                                        runs=report.runs, alike=report.alike)
            self._report = report
            self.graph.release()
            self.saved.release()
            self.watch.release()
            self.parameters = []
        return self._report

    def findings(self, inference) -> list:
        """The backward's diagnostics (:mod:`.checks`), worked out with its report."""
        self.report(inference)
        return self._findings

    def _check(self, inference, report: BackwardReport) -> list:
        ran = self.graph.ran or self.graph.runs > 0
        missing, grads = [], []
        named = {g.of: g.dims for g in report.params}
        if ran and not self.refusals:
            for name, p in self.parameters:
                if p.grad is not None:
                    grads.append(checks.grad_facts(name, p, named.get(name + ".grad", (None,) * p.dim())))
                    continue
                cut = self.watch.cut_of(p)
                read = None if cut is not None else self.watch.reads.get(storage_of(p))
                if read in self.capture.setup:   # (read while the model was built, not in its forward)
                    read = None
                if cut is not None or read is not None:
                    missing.append((name, cut, read))
        return checks.findings(self.refusals, missing, grads, self.capture, inference)


def _parameters(capture) -> list:
    """``(name, parameter)`` of each parameter that requires grad of each outermost module the traced code
    called, once each (``w_q.weight``: named relative to that module)."""
    found, seen = [], set()
    for module, parent in capture.module_calls.first:
        if parent == -1:
            for name, p in module.named_parameters():
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    found.append((name, p))
    return found
