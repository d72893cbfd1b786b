"""Step mode's backward: after the forward's summary, one screen per backward row in the order autograd
ran it (a folded block or layer is one screen), then what autograd kept for it.

Each row's screen shows the forward op it differentiates (its code line is the one highlighted above,
``differentiates #12 matmul: y = weights @ v``), the gradient that arrived, each one sent back with its
memory word, and the registry's sentence (:mod:`shapetrace.render.backward`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text

from shapetrace.app.backward_folding import GradFold
from shapetrace.app.classroom import ViewOptions
from shapetrace.render.backward import BackwardView, fold_lines, fold_ops, grad_label, row_lines, saved_lines
from shapetrace.render.wrap import wrap

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.backward.rows import BackwardReport, BackwardRow
    from shapetrace.engine.events import Event
    from shapetrace.engine.report import Report


class BackwardSteps:
    """The backward's screens: :attr:`items` (a row or a fold each), then the saved-tensor summary."""

    def __init__(self, report: Report, options: ViewOptions = ViewOptions(),
                 doubled: tuple[int, BackwardReport] | None = None):
        self.view = BackwardView.of(report, options, doubled)
        self.items: list[BackwardRow | GradFold] = self.view.items()
        self.events = {e.index: e for e in report.events}

    def __len__(self) -> int:
        """The rows' screens and the summary's."""
        return len(self.items) + 1

    def coming(self) -> str:
        """What the forward's summary says comes next."""
        if not self.items:
            return f"next: what autograd keeps ({self.view.backward.note or 'no backward row'})"
        return f"next: the backward pass, {len(self.items)} screens in the order autograd ran it"

    def event_of(self, k: int) -> Event | None:
        """The forward op screen ``k`` differentiates (its first row's, for a fold); None on the summary."""
        if k >= len(self.items):
            return None
        item = self.items[k]
        row = item.rows[0] if isinstance(item, GradFold) else item
        return self.events.get(row.event) if row.event is not None else None

    def where(self, k: int) -> str:
        """The title's ``backward 5/18 · grad #11 softmax``."""
        if k >= len(self.items):
            return f"backward · what autograd keeps · {len(self.items)} grads"
        item = self.items[k]
        label = f"rows {item.label}" if isinstance(item, GradFold) else grad_label(item)
        return f"backward {k + 1}/{len(self.items)} · {label}"

    def part(self, k: int, width: int) -> Group:
        """Screen ``k``'s lower part: the row (or fold) and the forward op it differentiates, or the summary."""
        if k >= len(self.items):
            b = self.view
            return Group(Text("end of the backward pass: what autograd kept for it", style="bold"),
                         *saved_lines(b.backward, b.doubled, b.doubled_t, width))
        item = self.items[k]
        if isinstance(item, GradFold):
            lines = list(fold_lines(item, len(item.label), width))
        else:
            lines = row_lines(item, width)
        return Group(*self.tie_lines(k, width), *lines)

    def tie_lines(self, k: int, width: int) -> list[Text]:
        """``differentiates #12 matmul: y = weights @ v``, or why no forward row is tied."""
        e = self.event_of(k)
        if e is None:
            item = self.items[k]
            op = (item.rows[0] if isinstance(item, GradFold) else item).op
            return [Text(part, style="dim") for part in wrap(
                f"differentiates {op}, a call without a row of its own in the forward table: no code line "
                "is tied to it", width)]
        item = self.items[k]
        if isinstance(item, GradFold):
            ops = fold_ops(item).removeprefix("grad ") or f"the ops of {item.sentence.split(':')[0]}"
            text = f"differentiates {ops} (the code of #{e.index} is marked)"
        else:
            text = f"differentiates #{e.index} {e.op}: {e.code.split('  #')[0].strip()}"
        return [Text(part, style="bold" if i == 0 else "") for i, part in enumerate(wrap(text, width))]
