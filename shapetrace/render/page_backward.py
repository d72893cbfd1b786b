"""The backward on the classroom page (``run --backward --export trace.html``): its data, computed here
and embedded with the forward's (:mod:`shapetrace.render.page`).

One step per backward row after the forward's summary (a folded block or layer is one step), then what
autograd keeps. Each row is tied to the forward op it differentiates by that op's position among the
page's steps (``at``): the page marks its code line and its chip in the strip, and a click on the tie
goes there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shapetrace.app.backward_folding import GradFold
from shapetrace.app.classroom import ViewOptions
from shapetrace.engine.formatting import fmt_bytes, fmt_named
from shapetrace.render.backward import MEMORY_WORDS, BackwardView, fold_ops, grad_label, saved_cells, saved_summary
from shapetrace.render.wrap import glued as _glued

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.backward.rows import BackwardRow, GradInfo
    from shapetrace.engine.report import Report


def _tuple(values) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def _sent(g: GradInfo) -> list[str]:
    """``["operand 0", "[B=2, T=6, D=512]", "(3072, 512, 1)", "new 24 KiB"]``"""
    word = MEMORY_WORDS.get(g.memory, g.memory) + (f" {fmt_bytes(g.nbytes)}" if g.memory == "new" else "")
    return [g.of, _glued(fmt_named(g.dims, g.shape)), _glued(_tuple(g.stride)), word]


def _row(row: BackwardRow, at: dict[int, int]) -> dict[str, Any]:
    g = row.arrived[0]
    return {"label": str(row.order), "grad": grad_label(row), "op": row.op,
            "at": at.get(row.event) if row.event is not None else None,
            "arrived": [fmt_named(g.dims, g.shape), _tuple(g.stride), fmt_bytes(g.nbytes)],
            "made": [_sent(m) for m in row.made], "sentence": _glued(row.sentence), "fold": ""}


def _fold(fold: GradFold, at: dict[int, int]) -> dict[str, Any]:
    first = fold.rows[0]
    return {"label": fold.label, "grad": fold_ops(fold) or fold.sentence.split(":")[0], "op": first.op,
            "at": at.get(first.event) if first.event is not None else None,
            "arrived": [], "made": [], "sentence": "", "fold": fold.sentence}


def backward_data(trace: Report, options: ViewOptions = ViewOptions(), doubled=None) -> dict[str, Any] | None:
    """The page's ``backward``: its rows (folded as the table is), what autograd keeps; None without one."""
    if getattr(trace, "backward", None) is None:
        return None
    view = BackwardView.of(trace, options, doubled)
    at = {e.index: i for i, e in enumerate(trace.events)}
    rows = [_fold(item, at) if isinstance(item, GradFold) else _row(item, at) for item in view.items()]
    saved = [[str(s.index), *saved_cells(s)[:1], s.saver, *saved_cells(s)[1:]] for s in view.backward.saved]
    return {"rows": rows, "note": view.backward.note, "saved": saved,
            "summary": saved_summary(view.backward, view.doubled, view.doubled_t)}
