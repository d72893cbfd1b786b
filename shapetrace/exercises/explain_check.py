"""Plain-English facts for a verdict: where values went, why a call raised, what copied.

Imports torch (it reads tensors); no Rich. Every number comes from the tensors
or from the tracer's events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from shapetrace.engine.formatting import fmt_bytes, fmt_named, fmt_shape
from shapetrace.engine.ops import fails_on_strides, is_matrix_product
from shapetrace.engine.sentences import why_not_contiguous
from shapetrace.exercises import inputs as inp

#: How an axis name reads in a sentence about one element.
READ_AS = {"B": "batch", "T": "token", "T_k": "key", "D": "feature", "H": "head",
           "H_kv": "kv head", "d_k": "feature", "3*D": "column", "C": "channel", "H_img": "pixel row",
           "W_img": "pixel column", "N": "patch", "T_new": "new step"}


def fmt_index(idx) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def and_list(items) -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def name_shape(shape, inputs: inp.Inputs, names: str = "") -> str:
    """``[B=2, H=3, T=5, d_k=4]`` from given names, or names read from unambiguous sizes."""
    shape = [int(s) for s in shape]
    given = names.split()
    if len(given) == len(shape):
        return fmt_named(given, shape)
    sizes = dict(inputs.dims)
    sizes.update(inputs.sizes)
    by_size: dict[int, set[str]] = {}
    for n, s in sizes.items():
        if isinstance(s, int) and not isinstance(s, bool):
            by_size.setdefault(s, set()).add(n)
    unique = [next(iter(by_size[s])) if len(by_size.get(s, ())) == 1 else None for s in shape]
    return fmt_named(unique, shape)


def _source(inputs: inp.Inputs) -> tuple[torch.Tensor, list[str]] | None:
    for a, n in zip(inputs.args, inputs.names):
        if isinstance(a, torch.Tensor):
            names = n.split() if n else [f"axis {i}" for i in range(a.dim())]
            return a, names
    return None


def _labelled_sources(inputs: inp.Inputs) -> list[tuple[str, torch.Tensor, list[str]]]:
    """Every tensor input with its label (``x`` when the builder names none) and its axis names."""
    tensors = [(a, n) for a, n in zip(inputs.args, inputs.names) if isinstance(a, torch.Tensor)]
    labels = list(inputs.labels) or ["x"]
    return [(labels[i], a, n.split() if n else [f"axis {j}" for j in range(a.dim())])
            for i, (a, n) in enumerate(tensors[:len(labels)])]


def describe_source(value: float, inputs: inp.Inputs) -> str:
    """``x[0, 1, 4] (batch 0, token 1, feature 4)`` for a value of an arange input (of any labelled input,
    e.g. ``step[0, 1, 0, 2] (batch 0, kv head 1, new step 0, feature 2)``)."""
    sources = _labelled_sources(inputs)
    if not sources:
        return f"{value:g}"
    for label, tensor, names in sources:
        idx = inp.decode(float(value), tensor)
        if idx is not None:
            words = ", ".join(f"{READ_AS.get(n, n)} {i}" for n, i in zip(names, idx) if not n.isdigit())
            return f"{label}{fmt_index(idx)} ({words})"
    return f"{value:g} (not an element of the input)"


def value_facts(got: Any, want: Any, inputs: inp.Inputs, movement: bool) -> dict:
    """Facts about the first place two same-shaped outputs differ, for templates and lines."""
    if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)) or got.shape != want.shape:
        if not isinstance(got, torch.Tensor) and not isinstance(want, torch.Tensor):
            return {"lines": [f"with {inputs.describe()} you returned {got!r}; expected {want!r}"],
                    "got": got, "want": want}
        return {"lines": []}
    g, w = got.detach().float(), want.detach().float()
    differs = ~(torch.isclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True))
    nans = int(torch.isnan(g).sum())
    if not bool(differs.any()):
        return {"lines": []}
    idx = tuple(int(i) for i in differs.nonzero()[0])
    cell = "out" + fmt_index(idx)
    facts: dict[str, Any] = {"cell": cell, "nan_count": nans}
    if movement:
        facts["got"] = describe_source(g[idx].item(), inputs)
        facts["want"] = describe_source(w[idx].item(), inputs)
        tokens = _tokens_in(g[idx[:2]] if g.dim() > 2 else g, inputs)
        facts["block_tokens"] = ("token " if len(tokens) == 1 else "tokens ") + and_list(tokens)
        lines = [f"{cell} holds {facts['got']}; the reference has {facts['want']} there"]
        walk = axis_walk_line(g, w, inputs)
        if walk:
            lines.append(walk)
    else:
        facts["got"], facts["want"] = f"{g[idx].item() + 0.0:.4g}", f"{w[idx].item() + 0.0:.4g}"  # never "-0"
        lines = [f"{cell} is {facts['got']}; expected {facts['want']}"]
        scale = scale_line(g, w, inputs)
        if scale:
            lines.insert(0, scale)
        if nans:
            facts["nan_rows"] = int(torch.isnan(g).flatten(0, -2).any(-1).sum()) if g.dim() > 1 else nans
            lines.append(f"your output holds {nans} NaN values ({facts['nan_rows']} whole rows); "
                         "the reference has none" if not bool(torch.isnan(w).any())
                         else f"your output holds {nans} NaN values")
    facts["lines"] = lines
    return facts


def _ratio(got: torch.Tensor, want: torch.Tensor) -> float | None:
    """The one factor relating every element of ``got`` to ``want`` (None when there is no single one)."""
    both = torch.isfinite(got) & torch.isfinite(want) & (want.abs() > 1e-6)
    if not bool(both.any()) or bool(((want.abs() <= 1e-6) & (got.abs() > 1e-5)).any()):
        return None
    r = got[both] / want[both]
    c = float(r.median())
    return c if bool(torch.allclose(r, torch.full_like(r, c), rtol=1e-3, atol=1e-5)) and abs(c - 1) > 1e-3 else None


def _named_factor(c: float, inputs: inp.Inputs) -> str:
    sizes = {**inputs.dims, **inputs.sizes}
    for name, n in sizes.items():
        if type(n) is not int or n < 2:
            continue
        for text, value in ((f"√{name}", n ** 0.5), (f"1/√{name}", n ** -0.5), (name, n), (f"1/{name}", 1 / n)):
            if abs(c - value) <= 1e-3 * abs(value):
                return f" ({text}, with {name} = {n})"
    return ""


def scale_line(got: torch.Tensor, want: torch.Tensor, inputs: inp.Inputs) -> str:
    """``every value of yours is 0.3333 times the expected one (1/√d_k, with d_k = 9)`` or ""."""
    c = _ratio(got, want)
    if c is None:
        return ""
    return f"every value of yours is {c + 0.0:.4g} times the expected one{_named_factor(c, inputs)}"  # never "-0"


def _walks(out: torch.Tensor, inputs: inp.Inputs) -> list[tuple[str, ...]] | None:
    """For each output axis, which input axes change when you step along it (from index 0)."""
    src = _source(inputs)
    if src is None or out.dim() == 0:
        return None
    tensor, names = src
    lines = [out[tuple(slice(None) if j == axis else 0 for j in range(out.dim()))].tolist()  # (out.shape[axis],)
             if out.shape[axis] > 1 else [] for axis in range(out.dim())]
    coords = inp.decode_many([float(v) for line in lines for v in line], tensor)  # (one sort of the input)
    if None in coords:
        return None
    walks, at = [], 0
    for line in lines:
        walked, at = coords[at:at + len(line)], at + len(line)
        walks.append(tuple(n for j, n in enumerate(names) if len({c[j] for c in walked}) > 1))
    return walks


def _read(names: tuple[str, ...]) -> str:
    words = list(dict.fromkeys(READ_AS.get(n, n) for n in names))
    if not words:
        return "nothing changes"
    return f"the {and_list(words)} {'index changes' if len(words) == 1 else 'indexes change'}"


def axis_walk_line(got: torch.Tensor, want: torch.Tensor, inputs: inp.Inputs) -> str:
    """``along your axis 1 (size 3) the token and feature indexes change; in the reference ...``"""
    mine, ref = _walks(got, inputs), _walks(want, inputs)
    if mine is None or ref is None:
        return ""
    for axis, (a, b) in enumerate(zip(mine, ref)):
        if set(a) != set(b):
            return (f"stepping along your axis {axis} (size {got.shape[axis]}), {_read(a)}; in the reference, "
                    f"{_read(b)}")
    return ""


def _tokens_in(block: torch.Tensor, inputs: inp.Inputs) -> list[int]:
    src = _source(inputs)
    if src is None:
        return []
    tensor, names = src
    axis = next((i for i, n in enumerate(names) if n in ("T", "T_k")), None)
    if axis is None:
        return []
    return sorted({idx[axis] for idx in inp.decode_many(block.flatten().tolist(), tensor) if idx is not None})


def crash_lines(trace) -> list[str]:
    """What the failing op was given, in shapes and names, and the usual fix."""
    if trace is None:
        return []
    failed = next((e for e in reversed(trace.events) if e.error), None)
    if failed is None:
        return []
    lines = []
    for n, t in enumerate(failed.inputs[:2]):
        what = "" if t.contiguous else f", not contiguous ({why_not_contiguous(t)})"
        label = "on" if n == 0 else "and"
        lines.append(f"{failed.op} #{failed.index} {label} {fmt_shape(t)} strides {t.stride}{what}"
                     + (f" with ({failed.args})" if n == 0 and failed.args and len(failed.inputs) == 1
                        else ""))
    first = failed.inputs[0] if failed.inputs else None
    if fails_on_strides(failed.spec) and first is not None and not first.contiguous:
        lines.append("view never copies, and these strides cannot be read as the shape you asked for. "
                     "Two fixes: .contiguous().view(...) copies the data into row-major order first; "
                     ".reshape(...) makes the same copy, silently, only when it has to.")
    elif is_matrix_product(failed.spec) and len(failed.inputs) == 2:
        a, b = failed.inputs
        lines.append(f"a @ b needs the last axis of a ({a.shape[-1]}) to equal the second-to-last of b "
                     f"({b.shape[-2] if len(b.shape) > 1 else b.shape[0]}), and the leading (batch) axes "
                     f"{list(a.shape[:-2])} and {list(b.shape[:-2])} to match or broadcast")
    return lines


def diagnostics_of(trace) -> list[dict]:
    return [d.to_dict() for d in trace.diagnostics] if trace is not None else []


def layout_copies(trace, allocs: bool = False) -> list[str]:
    """One line per traced op that copied (or, with ``allocs``, allocated) memory."""
    if trace is None:
        return []
    lines = []
    for e in trace.events:
        size = e.alloc_bytes if allocs else e.copy_bytes
        if size:
            verb = "allocated" if allocs and not e.copy_bytes else "copied"
            where = e.source.rsplit("/", 1)[-1]
            lines.append(f"  {where}: `{e.code.split('  #')[0].rstrip()}` {e.op} {verb} {fmt_bytes(size)}")
    return lines


def mutation_lines(before: torch.Tensor, after: torch.Tensor) -> list[str]:
    """Where the caller's tensor changed: its layout, or its first changed value."""
    if tuple(before.shape) != tuple(after.shape) or before.stride() != after.stride():
        return [f"its shape/strides changed from {list(before.shape)} {tuple(before.stride())} to "
                f"{list(after.shape)} {tuple(after.stride())}"]
    b, a = before.float(), after.float()
    differs = ~(torch.isclose(a, b, equal_nan=True))
    if not bool(differs.any()):
        return []
    idx = tuple(int(i) for i in differs.nonzero()[0])
    return [f"input{fmt_index(idx)} was {b[idx].item():.4g} before your call and {a[idx].item():.4g} after "
            f"({int(differs.sum())} values changed)"]


def in_place_line(trace, path: str) -> tuple[int | None, str]:
    """The learner's line of the first traced in-place op (``transpose_``, ``masked_fill_``, ``copy_``: not a
    write through an index, ``t[i] = v``)."""

    if trace is None:
        return None, ""
    for e in trace.events:
        if e.spec.inplace and e.spec.write != "index":
            file, _, line = e.source.rpartition(":")
            if line.isdigit() and Path(file).resolve() == Path(path).resolve():
                return int(line), e.code
    return None, ""
