"""Tensors the model was given that none of its ops read (fairseq issue #318: the encoder's padding mask
handed to the decoder layer, never passed on to the encoder attention).

Every check reads what an op did with its operands; an argument that no op reads is outside them all: a
padding mask left unused hides nothing, and the run looks the same as a model that needs no mask. So the
first outermost module call's tensor arguments are noted when it starts (:func:`note_arguments`, called
from :mod:`.modules`: the node each holds, its position or keyword, its shape and dtype; :func:`note_end`
when it returns), and after the run
:func:`unread_arguments` lists those that no record the call made has among its operands. Reading only
metadata (``x.size(1)``, ``x.dim()``) or a value through a call without a record (``x.tolist()``,
``x.item()``) is not reading it on the record: such an argument is listed too, which costs a ``?`` (a
``input-unread`` note, :mod:`.rules.unread`), never an error. Parameters and a module's own tensors
passed back to it are not inputs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.capture import Capture


class Argument(NamedTuple):
    """One tensor argument of the top call: where it was passed and what it was."""

    name: str          # the ``forward`` parameter's name where known, else ``argument 2``
    node: int          # the node it held when the call started
    shape: tuple[int, ...]
    dtype: str         # ``bool``, ``float32``...


@dataclass
class FirstCall:
    """The first outermost module call: its records ``[start, end)`` (``end`` None until it returns), its
    tensor arguments, and the node of the tensor it returned (None: none, or it has not returned)."""

    start: int
    arguments: tuple[Argument, ...]
    end: int | None = None
    output: int | None = None


def note_arguments(capture: Capture, module, args: tuple, kwargs: dict, start: int) -> None:
    """Note the tensor arguments of the first outermost call (``start``: its first record's index)."""
    names = _parameter_names(module)
    passed = [*((names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args)),
              *kwargs.items()]
    with torch._C.DisableTorchFunction():   # (reading a tensor's facts is not the traced code's work)
        found = tuple(Argument(name, capture.node_of(a), tuple(a.shape), str(a.dtype).removeprefix("torch."))
                      for name, a in passed
                      if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter)
                      and not any(a is held for held in module._buffers.values()))
    capture.module_calls.first_call = FirstCall(start, found)


def note_end(capture: Capture, result=None) -> None:
    """The first outermost call returned: its records end here (a later call's reads are not its own), and
    the node of the tensor it returned (its first, in a tuple or a model output) is kept beside them."""
    first = capture.module_calls.first_call
    if first is not None and first.end is None:
        first.end = len(capture.records)
        out = result[0] if isinstance(result, (tuple, list)) and result else result
        if not isinstance(out, torch.Tensor) and hasattr(out, "to_tuple"):   # (transformers' ModelOutput)
            out = next(iter(out.to_tuple()), None)
        if isinstance(out, torch.Tensor):
            with torch._C.DisableTorchFunction():
                first.output = capture.node_of(out)


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
    return tuple(a for a in first.arguments if a.node not in read)
