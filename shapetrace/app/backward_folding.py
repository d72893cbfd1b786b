"""The backward's repeated rows, folded as the forward's ops are (plain data, no Rich, no torch).

The forward's two folds, over the backward's rows: first the rows of a layer (``h.10``: the rows whose
forward call ran in it) that repeat the layer autograd ran before them, fact for fact, fold into one line
(``h.9-0: the same 20 grads as h.10``, :func:`~shapetrace.app.layers.fold_layers` with the layers in the
backward's order); then, among the rows left in each layer, a block that repeats an earlier block (q's split heads'
grads and v's) folds into one line (``q: the same two grads as v, rows 9-10``,
:func:`~shapetrace.app.folding.find_repeats`).

A row's facts: its op, the autograd nodes that ran, every gradient's shape, strides, names, dtype, bytes,
memory word and what it went to (a parameter by its path inside its layer when layers are compared), its
sentence, and the forward op it differentiates, fact for fact but its number
(:func:`~shapetrace.app.layers.event_facts`). A row whose forward op was diagnosed never folds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shapetrace.app.folding import _NUMBER_WORDS, find_repeats, signature, target
from shapetrace.app.layers import event_facts, fold_layers, inner_path, layer_of

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.backward.rows import BackwardRow
    from shapetrace.engine.events import Event


@dataclass(frozen=True)
class GradStep:
    """A backward row as the layer fold reads an op: its ``index`` (the row's order) and ``module``."""

    row: BackwardRow
    event: Event | None

    @property
    def index(self) -> int:
        return self.row.order

    @property
    def module(self) -> str:
        return self.row.module


@dataclass(frozen=True)
class GradFold:
    """Consecutive backward rows shown as one line: they repeat ``original`` fact for fact."""

    rows: tuple[BackwardRow, ...]
    original: tuple[BackwardRow, ...]
    sentence: str

    @property
    def label(self) -> str:
        """The rows the line stands for: ``15-16``."""
        first, last = self.rows[0].order, self.rows[-1].order
        return str(first) if first == last else f"{first}-{last}"


def row_facts(step: GradStep, within_layer: bool = False) -> tuple:
    """Every fact of a backward row but its order, with its forward op's: as the layer fold compares ops
    (``within_layer``: parameters by their path in the layer), or as the block fold does (the forward op
    as :func:`~shapetrace.app.folding.signature` sees it: k's split is q's, called from another line)."""
    r, e = step.row, step.event
    grads = tuple((inner_path(g.of) if within_layer else g.of, g.shape, g.stride, g.dims, g.dtype, g.nbytes,
                   g.memory) for g in (*r.arrived, *r.made))
    forward = None if e is None else event_facts(e) if within_layer else signature(e)
    return r.op, r.nodes, grads, r.sentence, inner_path(r.module), forward


def fold_backward(rows: Sequence[BackwardRow], events: Sequence[Event], keep: Collection[int] = ()) -> list[GradFold]:
    """The folds of the backward's rows (each at most once), in row order.

    Args:
        rows: the backward's rows, in the order autograd ran them.
        events: the forward's ops (each row's ``event`` is the index of one).
        keep: forward op indices never folded (diagnosed ones): their rows are shown.
    """
    by_index = {e.index: e for e in events}
    steps = [GradStep(r, by_index.get(r.event) if r.event is not None else None) for r in rows]
    kept = {r.order for r in rows if r.event in keep}
    folds = [GradFold(tuple(s.row for s in f.events), tuple(s.row for s in f.original.events), f.sentence)
             for f in fold_layers(steps, keep=kept, facts=lambda s: row_facts(s, True), step=-1, noun="grad")]
    folded = {r.order for f in folds for r in f.rows}
    left = [s for s in steps if s.index not in folded]
    for start, stop in _runs(left):
        run = left[start:stop]
        repeats = find_repeats([row_facts(s) for s in run], [s.index in kept for s in run])
        folds += [_block_fold(run, r.start, r.original, r.length, r.period, by_index) for r in repeats]
    return sorted(folds, key=lambda f: f.rows[0].order)


def _runs(steps: Sequence[GradStep]) -> list[tuple[int, int]]:
    """Spans of ``steps`` in one layer whose orders follow one another: blocks are looked for within each
    layer, as the forward's are (a folded layer ends a span too)."""
    spans, start = [], 0
    for i in range(1, len(steps) + 1):
        if i == len(steps) or steps[i].index != steps[i - 1].index + 1 or \
                layer_of(steps[i].module) != layer_of(steps[i - 1].module):
            spans.append((start, i))
            start = i
    return spans


def _block_fold(run: Sequence[GradStep], i: int, j: int, length: int, period: int,
                by_index: Mapping[int, Event]) -> GradFold:
    """``q: the same two grads as v, rows 9-10``; a loop's: ``the same 3 grads as rows 4-6, 2 more times``."""
    block = tuple(s.row for s in run[i:i + length])
    size = period or length
    original = tuple(s.row for s in run[j:j + size])
    count = _NUMBER_WORDS.get(size, str(size))
    where = f"rows {original[0].order}-{original[-1].order}"
    if period:
        times = length // period
        again = "once more" if times == 1 else f"{times} more times"
        return GradFold(block, original, f"the same {count} grads as {where}, {again}")
    mine, theirs = _target_before(block, by_index), _target_before(original, by_index)
    if mine and theirs and mine != theirs:
        return GradFold(block, original, f"{mine}: the same {count} grads as {theirs}, {where}")
    return GradFold(block, original, f"the same {count} grads as {where}")


def _target_before(rows: Sequence[BackwardRow], by_index: Mapping[int, Event]) -> str | None:
    """``q`` when the forward op just before the block's first one is written ``q = ...`` (as the forward's
    fold names its blocks)."""
    numbers = [r.event for r in rows if r.event is not None]
    return target(by_index.get(min(numbers) - 1)) if numbers else None
