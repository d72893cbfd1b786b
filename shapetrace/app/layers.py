"""Repeated layers of a whole model, found so the table can show one and fold the rest (plain data).

Every event knows the module path it ran in (``h.3.attn``). The layer is the path up to its first
number (``h.3``); consecutive layers of one stack (``h.0``, ``h.1``, ...) whose ops are identical,
fact for fact (op, source line, shapes, strides, names, memory, the module path inside the layer),
fold into one line: ``h.1-11: the same 19 ops as h.0``. A layer that differs in anything is shown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shapetrace.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.events import Event, TensorInfo


@functools.lru_cache(maxsize=1 << 16)  # one module path per module, looked up once per op
def layer_of(module: str) -> tuple[str, int] | None:
    """``("h", 3)`` for ``h.3.attn``; None for a path with no numbered part (``wte``, "").

    >>> layer_of("transformer.h.3.attn"), layer_of("wte")
    (('transformer.h', 3), None)
    """
    parts = module.split(".") if module else []
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[:i]), int(part)
    return None


def layer_path(module: str) -> str:
    """The module path at the layer level: ``h.3`` for ``h.3.attn``, ``wte`` for ``wte``, "" at the top."""
    layer = layer_of(module)
    return f"{layer[0]}.{layer[1]}" if layer else module.split(".")[0]


def inner_path(module: str) -> str:
    """The path inside the layer: ``attn`` for ``h.3.attn`` (what two identical layers share)."""
    layer = layer_of(module)
    if layer is None:
        return module
    return module[len(f"{layer[0]}.{layer[1]}"):].lstrip(".")


@dataclass(frozen=True)
class Layer:
    """The consecutive ops of one layer (``h.3``) in the order they ran."""

    stack: str
    number: int
    events: tuple[Event, ...]

    @property
    def path(self) -> str:
        return f"{self.stack}.{self.number}"


@dataclass(frozen=True)
class LayerFold:
    """Consecutive layers identical to an earlier one (``original``), shown as one line."""

    layers: tuple[Layer, ...]
    original: Layer
    noun: str = "op"   #: what the sentence counts: the forward's ops, the backward's grads

    @functools.cached_property
    def events(self) -> tuple[Event, ...]:
        return tuple(e for layer in self.layers for e in layer.events)

    @property
    def label(self) -> str:
        return f"{self.events[0].index}-{self.events[-1].index}"

    @property
    def sentence(self) -> str:
        first, last = self.layers[0], self.layers[-1]
        which = first.path if first is last else f"{first.stack}.{first.number}-{last.number}"
        n = len(self.original.events)
        ops = self.noun if n == 1 else f"{n} {self.noun}s"
        return f"{which}: the same {ops} as {self.original.path}"


def split_layers(events: Sequence[Event]) -> list[Layer | Event]:
    """The events in order, each run of one layer's ops gathered into a :class:`Layer`."""
    runs: list[tuple[tuple[str, int] | None, list[Event]]] = []
    for e in events:
        key = layer_of(e.module)
        if key is not None and runs and runs[-1][0] == key:
            runs[-1][1].append(e)
        else:
            runs.append((key, [e]))
    return [Layer(key[0], key[1], tuple(evs)) if key else evs[0] for key, evs in runs]


def tensor_facts(t: TensorInfo) -> tuple:
    """Every recorded fact of one tensor: shape, strides, offset, dtype, layout, names, device, bytes."""
    return t.shape, t.stride, t.storage_offset, t.dtype, t.contiguous, t.dims, t.device, t.nbytes


def event_facts(e: Event) -> tuple:
    """Every recorded fact of one op but its index and the layer's number in its module path."""
    return (e.op, e.source, e.code, e.function, e.args, e.view, e.noop, e.alloc_bytes, e.copy_bytes,
            repr(e.params), e.stack, e.error, inner_path(e.module), e.projections,
            tuple(tensor_facts(t) for t in e.inputs), tuple(tensor_facts(t) for t in e.outputs))


def layer_signature(layer: Layer, facts: Callable[[Any], tuple] = event_facts) -> tuple:
    """A hashable key equal for two layers exactly when every recorded fact of every op matches, in order."""
    return (layer.stack, tuple(facts(e) for e in layer.events))


def fold_layers(events: Sequence[Event], expand: int | None = None, keep: Collection[int] = (),
                facts: Callable[[Any], tuple] = event_facts, step: int = 1, noun: str = "op") -> list[LayerFold]:
    """Runs of consecutive layers identical to an earlier layer of the same stack.

    Linear in the number of ops: each layer's signature is computed once and looked up in a dict
    (the first layer with a signature is the original every later identical layer folds into).

    Args:
        events: the recorded ops, in order (or any items with an ``index`` and a ``module``: the
            backward's rows, :mod:`~shapetrace.app.backward_folding`).
        expand: a layer number never folded (``--layer N``).
        keep: event indices never folded (diagnosed ops): a layer holding one is shown.
        facts: what must match, item for item, for two layers to be the same.
        step: the next layer's number (1: the forward runs h.0, h.1...; -1: the backward runs h.11, h.10...).
        noun: what the fold's sentence counts (``the same 19 ops as h.0``).
    """
    keep = frozenset(keep)
    first: dict[tuple, Layer] = {}
    folds: list[LayerFold] = []
    run: list[Layer] = []
    run_original: Layer | None = None
    for item in split_layers(events):
        original = _original(item, first, expand, keep, facts) if isinstance(item, Layer) else None
        if original is not None and original is run_original and run[-1].number + step == item.number:
            run.append(item)
            continue
        if run:
            folds.append(LayerFold(tuple(run), run_original, noun))
        run, run_original = ([item], original) if original is not None else ([], None)
    if run:
        folds.append(LayerFold(tuple(run), run_original, noun))
    return folds


def _original(layer: Layer, first: dict[tuple, Layer], expand: int | None, keep: frozenset[int],
              facts: Callable[[Any], tuple] = event_facts) -> Layer | None:
    """The earlier layer ``layer`` repeats fact for fact, or None (new, expanded or holding a diagnosed op)."""
    original = first.setdefault(layer_signature(layer, facts), layer)
    if original is layer or layer.number == expand or any(e.index in keep for e in layer.events):
        return None
    return original


def layer_numbers(events: Sequence[Event]) -> dict[str, list[int]]:
    """The layer numbers of each stack, in order of first use: ``{"layers": [0, 1, 2]}``."""
    numbers: dict[str, dict[int, None]] = {}
    for e in events:
        key = layer_of(e.module)
        if key is not None:
            numbers.setdefault(key[0], {})[key[1]] = None
    return {stack: sorted(found) for stack, found in numbers.items()}


def number_ranges(numbers: Sequence[int]) -> str:
    """``0-11`` for 0..11; ``1, 3-5`` where numbers are missing.

    >>> number_ranges([0, 1, 2, 3]), number_ranges([1, 3, 4, 5, 9])
    ('0-3', '1, 3-5, 9')
    """
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and spans[-1][1] + 1 == n:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def check_layer_number(number: int | None) -> int | None:
    """``--layer N`` before anything is traced: a layer number is the index in a module path (``layers.0``
    is the first layer), so it is 0 or more; a UsageError otherwise.

    >>> check_layer_number(3)
    3
    """
    if number is not None and number < 0:
        raise UsageError(f"--layer {number}: a layer number is the index in a module path such as layers.0 "
                         "(the first layer): give 0 or more")
    return number


def check_layer(events: Sequence[Event], number: int, filtered: bool = False) -> None:
    """Raise a :class:`~shapetrace.errors.UsageError` when no shown layer has ``number`` (``--layer N``).

    Args:
        events: the ops the table shows.
        number: the layer asked for.
        filtered: True when --only/--include/--exclude hid some ops (the message says so).
    """
    stacks = layer_numbers(events)
    if any(number in found for found in stacks.values()):
        return
    whose = "the ops shown (after --only/--include/--exclude) are in" if filtered else "this model has"
    if not stacks:
        raise UsageError(f"--layer {number}: {whose} no numbered layers (no module path like layers.0)")
    if len(stacks) == 1:
        (found,) = stacks.values()
        raise UsageError(f"--layer {number}: {whose} layers {number_ranges(found)}")
    parts = [f"{stack} {number_ranges(found)}" for stack, found in stacks.items()]
    raise UsageError(f"--layer {number}: {whose} layers {' and '.join(parts)}")


def layered(events: Sequence[Event]) -> bool:
    """True when the ops ran in more than one numbered layer (a whole model, not one block)."""
    return len({layer_of(e.module) for e in events} - {None}) > 1


@dataclass(frozen=True)
class ModuleRow:
    """One line of the per-module summary: a module path at the layer level (or a run of identical
    layers, ``each`` True) and its counts."""

    path: str
    ops: int
    views: int
    copies: int
    copy_bytes: int
    computed_bytes: int
    each: bool = False


def module_summary(events: Sequence[Event]) -> list[ModuleRow]:
    """Ops, views, copies (bytes; torch's hidden ones inside matmul included, as in the footer) and
    computed bytes per layer-level module path, in order of first use.

    Consecutive layers of one stack with the same counts share one row (``h.1-11``, counts for each).
    """
    from shapetrace.engine.summary import stats

    groups: dict[str, list[Event]] = {}
    for e in events:
        groups.setdefault(layer_path(e.module), []).append(e)
    rows = []
    for path, evs in groups.items():
        s = stats(evs)
        hidden = [c.nbytes for e in evs if not e.error for c in e.hidden_copies]  # torch's own, inside matmul
        rows.append(ModuleRow(path or "(top level)", s["ops"], s["views"], s["copies"] + len(hidden),
                              s["copy_bytes"] + sum(hidden), s["alloc_bytes"]))
    return _merge_layers(rows)


def _counts(row: ModuleRow) -> tuple:
    return row.ops, row.views, row.copies, row.copy_bytes, row.computed_bytes


def _merge_layers(rows: list[ModuleRow]) -> list[ModuleRow]:
    out: list[tuple[ModuleRow, int, int]] = []  # (row, first layer, last layer)
    for row in rows:
        key = layer_of(row.path)
        if key and out:
            prev, first, last = out[-1]
            prev_key = layer_of(prev.path)
            if prev_key and prev_key[0] == key[0] and last + 1 == key[1] and _counts(prev) == _counts(row):
                out[-1] = (prev, first, key[1])
                continue
        out.append((row, key[1] if key else 0, key[1] if key else 0))
    return [row if first == last else ModuleRow(f"{layer_of(row.path)[0]}.{first}-{last}", *_counts(row), each=True)
            for row, first, last in out]
