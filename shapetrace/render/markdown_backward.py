"""The backward in a Markdown export (``--export notes.md`` after ``run --backward``): one table row per
backward row in the order autograd ran it, folded as the terminal's table is, then what autograd keeps.

| row | grad of | arrived [names] | strides | bytes | sent back | what its backward computes |
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.app.classroom import ViewOptions
from shapetrace.engine.formatting import fmt_bytes, fmt_named
from shapetrace.render.backward import MEMORY_WORDS, BackwardView, fold_ops, grad_label, saved_cells, saved_summary

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.backward_folding import GradFold
    from shapetrace.engine.backward.rows import BackwardRow, GradInfo
    from shapetrace.engine.report import Report

MD_BACKWARD_COLUMNS = ("row", "grad of", "arrived [names]", "strides", "bytes", "sent back",
                       "what its backward computes")
MD_SAVED_COLUMNS = ("saved", "forward op", "autograd node", "shape [names]", "bytes")


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def _tuple(values) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "|".join(["---:"] + ["---"] * (len(columns) - 1)) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def md_sent(g: GradInfo) -> str:
    """``operand 0 [B=2, T=6, D=512] (3072, 512, 1) **new 24 KiB**`` (a new tensor in bold, as a copy is)."""
    word = MEMORY_WORDS.get(g.memory, g.memory)
    word = f"**{word} {fmt_bytes(g.nbytes)}**" if g.memory == "new" else word
    return f"{_cell(g.of)} {_cell(fmt_named(g.dims, g.shape))} {_tuple(g.stride)} {word}"


def md_grad_row(row: BackwardRow) -> list[str]:
    g = row.arrived[0]
    return [str(row.order), f"`{grad_label(row).removeprefix('grad ')}`", _cell(fmt_named(g.dims, g.shape)),
            _tuple(g.stride), fmt_bytes(g.nbytes), "<br>".join(md_sent(m) for m in row.made), _cell(row.sentence)]


def md_fold_row(fold: GradFold) -> list[str]:
    ops = fold_ops(fold).removeprefix("grad ")
    return [fold.label, f"`{ops}`" if ops else "", "", "", "", "", f"*{_cell(fold.sentence)}*"]


def md_backward(trace: Report, options: ViewOptions = ViewOptions(), doubled=None) -> list[str]:
    """The backward section's lines: title, the rows' table, what autograd keeps and its table."""
    view = BackwardView.of(trace, options, doubled)
    b = view.backward
    lines = ["### Backward pass (in the order autograd ran it)", ""]
    if b.note:
        lines += [_cell(b.note), ""]
    folds = view.folds()
    folded = {r.order for f in folds.values() for r in f.rows}
    rows = [md_fold_row(folds[r.order]) if r.order in folds else md_grad_row(r)
            for r in b.rows if r.arrived and (r.order not in folded or r.order in folds)]
    if rows:
        lines += [*_table(MD_BACKWARD_COLUMNS, rows), ""]
    summary = saved_summary(b, view.doubled, view.doubled_t)
    if summary:
        lines += [f"**{_cell(summary[0])}**  ", *(f"{_cell(line)}  " for line in summary[1:]), ""]
        lines += _table(MD_SAVED_COLUMNS, [[str(s.index), f"`{where}`", s.saver, _cell(shape), _cell(tail)]
                                           for s in b.saved for where, shape, tail in [saved_cells(s)]])
    return lines
