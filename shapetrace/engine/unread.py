"""Tensors the model was given that none of its ops read (fairseq issue #318: the encoder's padding mask
handed to the decoder layer, never passed on to the encoder attention).

Every check reads what an op did with its operands; an argument that no op reads is outside them all: a
padding mask left unused hides nothing, and the run looks the same as a model that needs no mask. So the
first outermost module call's tensor arguments are noted when it starts (:func:`note_arguments`, called
from :mod:`.modules`: the node each holds, its position or keyword, its shape and dtype; :func:`note_end`
when it returns), and after the run
:func:`unread_arguments` lists those that no record the call made has among its operands. Reading only
metadata (``x.size(1)``, ``x.dim()``) or its values through a call without a record (``x.tolist()``,
``x.item()``) is not reading it on the record: such an argument is listed too, which costs a ``?`` (a
``input-unread`` note, :mod:`.rules.unread`), never an error. A call that hands the values to Python is
noted as it runs (:func:`values_read`), so the note says so rather than that nothing read it (sgl-project/
sglang issue #8675's torch-native backend loops over ``seq_lens.tolist()``). Parameters and a module's own
tensors passed back to it are not inputs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import torch

from shapetrace.engine.module_state import first_output
from shapetrace.engine.opspec import Family

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.capture import Capture


class Argument(NamedTuple):
    """One tensor argument of the top call: where it was passed and what it was."""

    name: str          # the ``forward`` parameter's name where known, else ``argument 2``
    node: int          # the node it held when the call started
    shape: tuple[int, ...]
    dtype: str         # ``bool``, ``float32``...
    front_padded: bool = False   # a 2-d mask of two values with a row padded in front (:func:`front_padded`)
    packed: bool = False         # 2-d positions restarting at 0 inside a row (:func:`packed_positions`)
    offsets: bool = False        # cumulative lengths of sequences packed along an axis (:func:`token_offsets`)
    read_as: str = ""            # the first call that handed its values to Python (``tolist``), if one did


@dataclass
class FirstCall:
    """The first outermost module call: its records ``[start, end)`` (``end`` None until it returns), its
    tensor arguments, and the node of the tensor it returned (None: none, or it has not returned)."""

    start: int
    arguments: tuple[Argument, ...]
    end: int | None = None
    output: int | None = None
    returned: frozenset[int] = frozenset()   # the nodes of every tensor it returned (in tuples, dicts, outputs)
    values_read: dict[int, str] = field(default_factory=dict)   # node -> the first call that handed its values on


def note_arguments(capture: Capture, module, args: tuple, kwargs: dict, start: int) -> None:
    """Note the tensor arguments of the first outermost call (``start``: its first record's index)."""
    names = _parameter_names(module)
    passed = [*((names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args)),
              *kwargs.items()]
    sizes = {n for _, a in passed if isinstance(a, torch.Tensor) for n in a.shape}   # (an offset ends at one)
    with torch._C.DisableTorchFunction():   # (reading a tensor's facts is not the traced code's work)
        found = tuple(Argument(name, capture.node_of(a), tuple(a.shape), str(a.dtype).removeprefix("torch."),
                               front_padded(a), packed_positions(a), token_offsets(a, sizes))
                      for name, a in passed
                      if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter)
                      and not any(a is held for held in module._buffers.values()))
    capture.module_calls.first_call = FirstCall(start, found)


def values_read(capture: Capture, func, args: tuple, kwargs: dict):
    """Run ``func`` (a call that hands a tensor's values to Python: ``x.tolist()``, ``x.item()``, ``int(x)``),
    noting, while the first outermost call runs, that its tensor was read and by which call."""
    first = capture.module_calls.first_call
    if first is not None and first.end is None and args and isinstance(args[0], torch.Tensor):
        node = capture.known_node(args[0])   # (a tensor the trace never saw is no argument: no node entered)
        if node is not None:
            first.values_read.setdefault(node, getattr(func, "__name__", "item"))
    return func(*args, **kwargs)


def front_padded(t: torch.Tensor, limit: int = 1 << 16) -> bool:
    """Is ``t`` a ``(B, T)`` padding mask with a row padded in front (left padding)? Two values only; a row that
    holds one value alone (an unpadded sequence: that value marks the real tokens, whichever convention) and a
    row of the other value then that one (its pads first). Read on the CPU, up to ``limit`` elements.

    >>> left, right = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]]), torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    >>> front_padded(left), front_padded(right)
    (True, False)
    """
    if t.dim() != 2 or t.shape[1] < 2 or t.device.type != "cpu" or t.is_meta or not 0 < t.numel() <= limit \
            or t.is_complex():
        return False
    values = t.unique()
    if values.numel() != 2:
        return False
    for real in values:
        rows = t == real                                                    # (B, T): True at the real tokens
        whole, sorted_rows = rows.all(1), rows.int().cummax(1).values.bool()
        if bool(whole.any()) and bool(((rows == sorted_rows).all(1) & ~rows[:, 0] & rows[:, -1]).any()):
            return True
    return False


def token_offsets(t: torch.Tensor, lengths) -> bool:
    """Is ``t`` the cumulative lengths of sequences packed along an axis of one of ``lengths`` (flash-attn's
    ``cu_seqlens``, allenai/OLMo-core's ``cu_doc_lens``): integers of one axis, from 0 up to one of ``lengths``,
    never falling? It cuts that axis, so its entries are never one per batch entry, even where it has as many.

    >>> token_offsets(torch.tensor([0, 2, 6]), {6}), token_offsets(torch.tensor([6, 4]), {6})
    (True, False)
    """
    if t.dim() != 1 or not 2 <= t.numel() <= 1 << 16 or t.device.type != "cpu" or t.is_meta \
            or t.dtype not in (torch.int64, torch.int32, torch.int16):
        return False
    return int(t[0]) == 0 and int(t[-1]) in lengths and bool((t.diff() >= 0).all())


def packed_positions(t: torch.Tensor, limit: int = 1 << 16) -> bool:
    """Is ``t`` a ``(B, T)`` tensor of positions with several sequences packed in one row? Integers only; every
    row a run of consecutive positions from 0, then another from 0 (``[0, 1, 2, 3, 0, 1]``), each run at least
    two long, and some row with two runs or more. A row of one run (``arange(T)``), left padding's ``cumsum(mask)
    - 1`` filled with 1 (``[1, 1, 0, 1, 2]``: a run that starts at 1), token types (``[0, 0, 1, 1]``) and ids
    are none. Read on the CPU, up to ``limit`` elements.

    >>> packed_positions(torch.tensor([[0, 1, 2, 0, 1]])), packed_positions(torch.tensor([[1, 1, 0, 1, 2]]))
    (True, False)
    """
    if t.dim() != 2 or t.shape[1] < 4 or t.device.type != "cpu" or t.is_meta or not 0 < t.numel() <= limit \
            or t.dtype not in (torch.int64, torch.int32, torch.int16):
        return False
    starts = torch.ones_like(t, dtype=torch.bool)
    starts[:, 1:] = t[:, 1:] != t[:, :-1] + 1                               # (B, T): where a run begins
    if not bool((t[starts] == 0).all()) or bool(starts[:, -1].any()):        # (every run from 0; none of one)
        return False
    return bool((starts[:, 1:] & starts[:, :-1]).logical_not().all()) and bool((starts.sum(1) > 1).any())


def note_end(capture: Capture, result=None) -> None:
    """The first outermost call returned: its records end here (a later call's reads are not its own), and
    the node of the tensor it returned (its first, in a tuple or a model output) is kept beside them."""
    first = capture.module_calls.first_call
    if first is not None and first.end is None:
        first.end = len(capture.records)
        out = first_output(result)   # (transformers' ModelOutput: its first tensor)
        with torch._C.DisableTorchFunction():
            if isinstance(out, torch.Tensor):
                first.output = capture.node_of(out)
            first.returned = frozenset(capture.node_of(t) for t in _tensors(result))


def _tensors(value, depth: int = 3):
    """The tensors of a returned value: itself, or those in its tuples, lists, dicts and model outputs (a few
    levels down; a cache object's tensors are not looked for)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth and isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v, depth - 1)
    elif depth and isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v, depth - 1)
    elif depth and hasattr(value, "to_tuple"):   # (transformers' ModelOutput)
        yield from _tensors(value.to_tuple(), depth - 1)


def output_node(capture: Capture) -> int | None:
    """The node of the tensor the first outermost call returned (None: none kept, or it has not returned)."""
    first = capture.module_calls.first_call
    return first.output if first is not None else None


def _parameter_names(module) -> list[str]:
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def unread_arguments(capture: Capture) -> tuple[Argument, ...]:
    """The top call's tensor arguments that no record the call made has among its operands."""
    first = capture.module_calls.first_call
    if first is None:
        return ()
    records = capture.records[first.start:first.end]   # (end None: the call did not return: what it made so far)
    read = {n for record in records for n in getattr(record, "ins", ())}
    read.update(getattr(record, "was", None) for record in records)   # (named inside: read on)
    return tuple(a._replace(read_as=first.values_read.get(a.node, "")) for a in first.arguments
                 if a.node not in read)


def bypassed_projections(capture: Capture) -> tuple[int, ...]:
    """The records of ``linear`` calls the first outermost call made whose results reach nothing the call
    returned (no op read them, or every op that did made only what the call dropped: :func:`live_nodes`), while
    the tensor they projected was read by another op (ethen8181/machine-learning issue #13: ``linear_proj =
    self.linear_proj(output)`` computed, ``output`` returned; a rotary rotation handed the values in place of
    the keys, ``rotate(q, v)``: the keys projected, split into heads and dropped): the projection's input went on
    in its place. A module whose projection is used on some call is not one (Mask2Former's class head runs
    after each layer and only the last layer's prediction is returned), nor is a projection whose input went
    nowhere else (a prefill run for its cache, its output dropped by the caller)."""
    first = capture.module_calls.first_call
    if first is None or first.end is None:
        return ()
    records = capture.records[first.start:first.end]
    reads: dict[int, int] = {}
    for record in records:
        for n in {*getattr(record, "ins", ()), getattr(record, "was", None)} - {None}:
            reads[n] = reads.get(n, 0) + 1
    live = live_nodes(records, first.returned)
    linears = [(i, record) for i, record in enumerate(records, first.start)
               if getattr(record, "spec", None) is not None and record.spec.family is Family.PROJECTION
               and getattr(record, "error", None) is None and record.outs and getattr(record, "ins", ())]
    used = {record.module for _, record in linears
            if any(n in live for n in record.outs)}
    return tuple(i for i, record in linears
                 if (record.module not in used or record.module < 0)
                 and not any(n in live for n in record.outs)
                 and reads.get(record.ins[0], 0) > 1)


def dropped_records(capture: Capture) -> tuple[int, ...]:
    """The records of the first outermost call whose results reach nothing the call returned (:func:`live_nodes`):
    lag-llama's ``q, _ = apply_rotary_pos_emb(q, k, ...)`` rotates the keys and throws them away. No element of
    theirs reached the output, so what they compute is no finding (a rule about a dropped value itself, such as
    a projection bypassed, says so on its own). Empty where the call did not return."""
    first = capture.module_calls.first_call
    if first is None or first.end is None:
        return ()
    records = capture.records[first.start:first.end]
    live = live_nodes(records, first.returned)
    return tuple(i for i, record in enumerate(records, first.start)
                 if getattr(record, "outs", ()) and getattr(record, "was", None) is None
                 and not (getattr(record, "spec", None) is not None and record.spec.inplace)
                 and not any(n in live for n in record.outs))


def live_nodes(records, returned: frozenset[int]) -> set[int]:
    """The nodes whose values reach what the call returned: walked back from ``returned`` through every record
    whose results are live. A record with no result (``cache[i] = k``), one that writes in place, or one with a
    node it renamed (``was``) counts as live, and so do all its operands: a write into a tensor kept elsewhere
    (a cache object, whose tensors are not looked for) is never taken for dead."""
    live = set(returned)
    for record in reversed(records):
        outs = getattr(record, "outs", ())
        spec = getattr(record, "spec", None)
        if not outs or getattr(record, "was", None) is not None or (spec is not None and spec.inplace) \
                or any(n in live for n in outs):
            live.update(getattr(record, "ins", ()))
            live.update(n for n in (getattr(record, "was", None), getattr(record, "node", None)) if n is not None)
    return live
