"""Repeated layers of a whole model, found so the table can show one and fold the rest (plain data).

Every event knows the module path it ran in (``h.3.attn``). The layer is the path up to its first
number (``h.3``); consecutive layers of one stack (``h.0``, ``h.1``, ...) whose ops are identical,
fact for fact (op, source line, shapes, strides, names, memory, the module path inside the layer),
fold into one line: ``h.1-11: the same 19 ops as h.0``. A layer that differs in anything is shown.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shapetrace.app.folding import signature

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.tracer import Event


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

    @property
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
        return f"{which}: the same {n} op{'s' if n != 1 else ''} as {self.original.path}"


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


def layer_signature(layer: Layer) -> tuple:
    """Everything recorded about a layer's ops except their indices and the layer's own number."""
    return tuple((signature(e), inner_path(e.module), repr(e.params))
                 for e in layer.events)


def fold_layers(events: Sequence[Event], expand: int | None = None, keep: Collection[int] = ()) -> list[LayerFold]:
    """Runs of consecutive layers identical to an earlier layer of the same stack.

    Args:
        events: the recorded ops, in order.
        expand: a layer number never folded (``--layer N``).
        keep: event indices never folded (diagnosed ops): a layer holding one is shown.
    """
    seen: dict[tuple, Layer] = {}
    folds: list[LayerFold] = []
    run: list[Layer] = []
    run_original: Layer | None = None
    for item in split_layers(events):
        original = None
        if isinstance(item, Layer):
            sig = (item.stack, layer_signature(item))
            original = seen.get(sig)
            foldable = expand != item.number and not any(e.index in keep for e in item.events)
            if original is None or not foldable:
                seen.setdefault(sig, item)
                original = None
        if original is not None and original is run_original and run and run[-1].number + 1 == item.number:
            run.append(item)
            continue
        if run:
            folds.append(LayerFold(tuple(run), run_original))
        run, run_original = ([item], original) if original is not None else ([], None)
    if run:
        folds.append(LayerFold(tuple(run), run_original))
    return folds


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
    """Ops, views, copies (bytes) and computed bytes per layer-level module path, in order of first use.

    Consecutive layers of one stack with the same counts share one row (``h.1-11``, counts for each).
    """
    from shapetrace.engine.summary import stats

    groups: dict[str, list[Event]] = {}
    for e in events:
        groups.setdefault(layer_path(e.module), []).append(e)
    rows = []
    for path, evs in groups.items():
        s = stats(evs)
        rows.append(ModuleRow(path or "(top level)", s["ops"], s["views"], s["copies"], s["copy_bytes"],
                              s["alloc_bytes"]))
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
