"""Picks made by value, recorded in one run and held in another: what the dependency contracts need
where a model routes its tokens by value.

A model that picks tokens by their values (Mixture-of-Depths' ``topk`` over router scores, a sort by
bucket, an ``argmax`` cluster) lets a moved token change *which* tokens are picked: every output it picks
or skips then changes, whichever way the data flows. The token contracts of :mod:`.dependencies` ask where
the data flows, so a contract that broke is measured once more with the picks held: a first run
(:class:`Picks` recording) keeps every pick, a second (:class:`Picks` replaying them) gives each pick-making
call the recorded picks instead of its own, and each pick's values are read again at the held positions
(``values = input.gather(dim, indices)``), so the data still flows from the moved token wherever it is read.

A pick is an integer or boolean tensor a call made from floating-point tensors (``topk``'s indices,
``argmax``, ``x > 0``, ``.long()``); one made from integers alone (positions from ``arange``, token ids)
is data, not a pick. A replay whose calls differ from the recording (another op, another shape) raises
:class:`NotHeld`: the picks could not be held, and the contract is not measured.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine.ops import record_params, spec_of_callable


class NotHeld(Exception):
    """The replay's calls are not the recording's: the picks cannot be held."""


def _is_pick(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex())


def _from_values(args: tuple, kwargs: dict) -> bool:
    """Does the call read a floating-point tensor (directly, or in a list of them)?"""
    for a in (*args, *kwargs.values()):
        for item in a if isinstance(a, (list, tuple)) else (a,):
            if isinstance(item, torch.Tensor) and (item.is_floating_point() or item.is_complex()):
                return True
    return False


def _picks_of(result: Any) -> list[torch.Tensor]:
    """The integer or boolean tensors ``result`` holds (a tensor, or a tuple such as ``topk``'s)."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [r for r in items if _is_pick(r)]


def _values_at(func, args: tuple, kwargs: dict, indices: torch.Tensor) -> torch.Tensor:
    """A ``(values, indices)`` result's values read again at ``indices``: the input gathered along the
    call's axis (its ``dim``; the last where none is given), the axis dropped where the call dropped it."""
    spec = spec_of_callable(func)
    if spec is None:
        raise NotHeld(f"{getattr(func, '__name__', func)}'s axis is not known")
    source, dim = args[0], record_params(spec, args, kwargs).get("dim", -1)
    if not isinstance(dim, int):
        raise NotHeld(f"{spec.name}'s axis is not one axis")
    if indices.dim() < source.dim():                                      # (the axis reduced away)
        return source.gather(dim, indices.unsqueeze(dim)).squeeze(dim)
    return source.gather(dim, indices)


class Picks(TorchFunctionMode):
    """Record every pick a run makes by value (``held=None``), or give each pick-making call the picks
    ``held`` recorded, in order (``moved``: the calls that made other picks than those held, by name)."""

    def __init__(self, held: list | None = None):
        super().__init__()
        self.recorded: list[tuple[Any, list[torch.Tensor]]] = []
        self.held, self.moved = held, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        picks = _picks_of(result)
        if not picks or not _from_values(args, kwargs):
            return result
        if self.held is None:
            self.recorded.append((func, [p.detach().clone() for p in picks]))
            return result
        return self._held_result(func, args, kwargs, result, picks)

    def _held_result(self, func, args: tuple, kwargs: dict, result: Any, picks: list) -> Any:
        at = len(self.recorded)
        if at >= len(self.held) or self.held[at][0] is not func:
            raise NotHeld("the run made other calls than the recorded one")
        held = self.held[at][1]
        if [(p.shape, p.dtype) for p in picks] != [(h.shape, h.dtype) for h in held]:
            raise NotHeld("a pick of another shape")
        self.recorded.append((func, picks))
        if all(torch.equal(p, h) for p, h in zip(picks, held)):
            return result
        name = getattr(func, "__name__", str(func))
        self.moved += [name] if name not in self.moved else []
        if isinstance(result, torch.Tensor):
            return held[0]
        if hasattr(result, "values") and hasattr(result, "indices") and len(result) == 2:   # topk, sort, max(dim)
            return type(result)((_values_at(func, args, kwargs, held[0]), held[0]))
        raise NotHeld(f"{name} returns picks the replay cannot hold")
