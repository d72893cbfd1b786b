"""Turn the hooked backward (:mod:`.graph`) and the saved tensors (:mod:`.saved`) into a
:class:`~.rows.BackwardReport`, with the forward's names (read from the trace's final inference)."""

from __future__ import annotations

import string

from shapetrace.engine import axes as ax
from shapetrace.engine.backward.rows import (
    WEIGHT_FAMILIES,
    BackwardReport,
    BackwardRow,
    GradInfo,
    SavedInfo,
    dims_of,
    grad_info,
    text_of,
)
from shapetrace.engine.opspec import Family


def build_report(graph, saved, capture, inference, param_names: dict[int, str]) -> BackwardReport:
    """Everything the backward showed, as plain data (the tensors are still held; released after)."""
    if not graph.ran:
        return BackwardReport((), (), _saved_infos(saved, graph, capture, inference),
                              note="no backward ran: no traced result requires grad")
    rows = tuple(_rows(graph, capture, inference, param_names))
    first = graph.run_ops[0] if graph.run_ops else []
    return BackwardReport(rows, tuple(_params(graph, capture, inference, param_names, rows)),
                          _saved_infos(saved, graph, capture, inference), runs=max(graph.runs, 1),
                          alike=sum(ops == first for ops in graph.run_ops) or 1)


def _rows(graph, capture, inference, names) -> list[BackwardRow]:
    by_record: dict[int, list] = {}
    for step in graph.steps:
        if step.record is not None:
            by_record.setdefault(step.record, []).append(step)
    return [_row(order, graph.claims[graph.owner[steps[0].node]], steps, capture, inference, names)
            for order, steps in enumerate(by_record.values())]


def _row(order: int, claim, steps: list, capture, inference, names) -> BackwardRow:
    record = capture.records[claim.record]
    event = inference.event_of_record.get(claim.record)
    op = inference.events[event].op if event is not None else record.spec.name
    arrived, incoming = _arrived(claim, steps, record, inference)
    made, fields = [], {}
    for step in steps:
        for edge in claim.boundaries.get(step.node, ()):
            grad = step.made[edge.slot] if edge.slot < len(step.made) else None
            if grad is not None:
                made.append(_made(edge, grad, record, incoming, capture, inference, names, fields))
    made.sort(key=lambda g: (not g.of.startswith("operand "), g.of if g.of.startswith("operand ") else ""))
    return BackwardRow(order, event, op, tuple(s.name for s in steps), tuple(arrived), tuple(made),
                       sentence(record.spec, arrived, fields), capture.module_calls.path(record.module))


def _made(edge, grad, record, incoming, capture, inference, names, fields) -> GradInfo:
    """A gradient sent back by a record: to operand ``edge.operand``, or into a leaf (a parameter)."""
    shape = tuple(grad.shape)
    if edge.operand is not None:
        node = record.ins[edge.operand] if edge.operand < len(record.ins) else None
        info = grad_info(f"operand {edge.operand}", grad, dims_of(inference, node, shape), incoming)
        fields.setdefault(f"in{edge.operand}", text_of(info.dims, info.shape))
        fields.setdefault(f"how{edge.operand}", HOW[info.memory])
        return info
    if edge.leaf is None:
        return grad_info("other", grad, (None,) * len(shape), incoming)
    node = capture.known_node(edge.leaf)
    dims = dims_of(inference, node, shape) if node is not None else _projection_dims(record, shape, inference)
    info = grad_info(names.get(id(edge.leaf), "a leaf"), grad, dims, incoming)
    if record.spec.family is Family.PROJECTION and len(shape) in (1, 2):
        fields.setdefault("weight" if len(shape) == 2 else "bias", text_of(info.dims, info.shape))
    return info


#: what a gradient sent back is, by its memory, in a sentence's ``{how0}``
HOW = {"same": "the same tensor (nothing is computed)", "view": "a view (no data moves)",
       "new": "a copy, since the strides do not allow a view"}


def _projection_dims(record, shape: tuple[int, ...], inference) -> tuple[str | None, ...]:
    """A linear's weight ``[out, in]`` and bias ``[out]``: the output's and the input's last axes (the
    op's own rule, not a guess); unnamed for any other op."""
    if record.spec.family is not Family.PROJECTION or not record.ins or not record.outs:
        return (None,) * len(shape)
    x_axes, y_axes = inference.axes_of(record.ins[0]), inference.axes_of(record.outs[0])
    x, y = inference.namer.dims_of(x_axes[-1:]), inference.namer.dims_of(y_axes[-1:])
    x_size, y_size = ax.sizes_of(x_axes[-1:]), ax.sizes_of(y_axes[-1:])
    if len(shape) == 2 and shape == y_size + x_size:
        return (*y, *x)
    if len(shape) == 1 and shape == y_size:
        return tuple(y)
    return (None,) * len(shape)


def _arrived(claim, steps: list, record, inference) -> tuple[list[GradInfo], list]:
    """The gradient of each output of the record (as it arrived at the output's node), and the tensors."""
    infos, tensors = [], []
    several = len(claim.outputs) > 1
    for position, edge in enumerate(claim.outputs):
        if edge is None:
            continue
        node, number = edge
        step = next((s for s in steps if s.node is node), None)
        grad = step.arrived[number] if step is not None and number < len(step.arrived) else None
        if grad is None:
            continue
        out = record.outs[position] if position < len(record.outs) else None
        tensors.append(grad)
        infos.append(grad_info(f"output {position}" if several else "output", grad,
                               dims_of(inference, out, tuple(grad.shape)), memory="incoming"))
    return infos, tensors


def sentence(spec, arrived: list[GradInfo], fields: dict[str, str]) -> str:
    """The registry's sentence for this op's backward, with the gradients' shapes in names."""
    template = spec.backward
    if not template or not arrived:
        return ""
    out = arrived[0]
    fields = {**fields, "out": text_of(out.dims, out.shape),
              "summed": ", ".join(d or str(s) for d, s in zip(out.dims[:-1], out.shape[:-1])) or "nothing"}
    parts = [part for part in template.split("; ") if _fields_in(part) <= fields.keys()]
    return "; ".join(part.format(**fields) for part in parts)


def _fields_in(text: str) -> set[str]:
    """The ``{field}`` names a template part uses (a part whose operand got no gradient is left out)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def _params(graph, capture, inference, names: dict[int, str], rows) -> list[GradInfo]:
    """Each leaf's ``.grad`` after the backward, with the names the rows that sent it gave it."""
    named = {g.of: g.dims for row in rows for g in row.made if not g.of.startswith("operand ")}
    found = []
    for tensor in graph.leaves.values():
        grad = tensor.grad
        if grad is None:
            continue
        name = names.get(id(tensor), "a leaf")
        node = capture.known_node(tensor)
        dims = dims_of(inference, node, tuple(grad.shape)) if node is not None else \
            named.get(name, (None,) * grad.dim())
        found.append(grad_info(name + ".grad", grad, dims))
    return found


def _saved_infos(saved, graph, capture, inference) -> tuple[SavedInfo, ...]:
    if saved is None:
        return ()
    made_by = _made_by(capture)
    first_on: dict[int, int] = {}
    weight_storages = {p.storage for p in saved.packed if p.node is not None and
                       made_by.get(p.node) is not None and made_by[p.node].spec.family in WEIGHT_FAMILIES}
    infos = []
    for p in saved.packed:
        claim = graph.claims[graph.owner[p.saver]] if p.saver in graph.owner else None
        event = inference.event_of_record.get(claim.record) if claim is not None else None
        op = inference.events[event].op if event is not None else \
            capture.records[claim.record].spec.name if claim is not None else \
            (p.saver.name() if p.saver is not None else "?")
        shares = first_on.get(p.storage) if p.storage else None
        if p.storage and shares is None:
            first_on[p.storage] = p.index
        infos.append(SavedInfo(p.index, event, op, p.saver.name() if p.saver is not None else "?", p.shape,
                               dims_of(inference, p.node, p.shape), p.nbytes, p.storage_bytes, shares,
                               p.parameter, p.storage in weight_storages))
    return tuple(infos)


def _made_by(capture) -> dict[int, object]:
    """node -> the record that made it."""
    found = {}
    for record in capture.records:
        for node in getattr(record, "outs", ()):
            found.setdefault(node, record)
    return found
