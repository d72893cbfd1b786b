"""The op registry: one :class:`~.opspec.OpSpec` per op, looked up by the function the capture sees.

Each spec (listed in :mod:`.op_table`) holds everything the engine knows about one op:

* ``names``: how axis names flow from its inputs to its outputs (a function of
  :mod:`shapetrace.engine.propagate`), or None when no name can be proven;
* ``memory``: whether its result aliases its input (``"view"``), may alias it (``"maybe"``: reshape,
  contiguous, indexing), moves the same values into a new buffer (``"copy"``), or computes new
  values (``"new"``);
* ``row``: whether it gets a row in the table (elementwise arithmetic passes names on silently);
* ``params``: the structured parameters recorded at call time (dim, p, training, fill value, the
  parsed einsum subscripts...), so no later step re-reads argument text;
* ``family``, ``replay``, ``meta``, ``scaling``, ``additive``, ``cheap``...: what rules, replays, the
  meta device and the capture need; ``words``: what the op does, in a few plain words.

An op is identified by its function (:func:`spec_of_callable`): ``torch.nn.functional.unfold`` (im2col, a
copy) and ``Tensor.unfold`` (windows, a view) are two ops; ``torch.split`` and ``Tensor.split`` are one.
A function the registry does not know gets :data:`UNKNOWN`: no row, and no names for its outputs (a
name that cannot be proven is not printed). :data:`REGISTRY` looks a spec up by name, for inputs that
are names by nature (a recorded event's op, a ``strides`` chain's text, JSON). Nothing in this module
imports torch until the capture asks for the functions.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import replace

from shapetrace.engine import propagate as pr
from shapetrace.engine.op_args import _is_tensor, all_operands, arg
from shapetrace.engine.op_table import ENTRIES
from shapetrace.engine.opspec import (
    ATTENTION_FAMILIES,
    BROADCAST_FAMILIES,
    LAYOUT_FAMILIES,
    Family,
    OpSpec,
    ReduceDtype,
)

__all__ = ["ATTENTION_FAMILIES", "BROADCAST_FAMILIES", "LAYOUT_FAMILIES", "REGISTRY", "UNKNOWN", "Family", "OpSpec",
           "ReduceDtype", "arg", "callable_index", "spec_for", "spec_of_callable"]


def _by_name(entries: list[OpSpec]) -> dict[str, OpSpec]:
    """Each spec under its name and its aliases (the first entry of a name wins: ``matmul`` is the
    product, ``__rmatmul__`` its reversed form)."""
    found: dict[str, OpSpec] = {}
    for spec in entries:
        for name in (spec.name, *spec.aliases):
            found.setdefault(name, spec)
    return found


#: op name -> spec: for names by nature (an event's ``op``, a chain's method, JSON); the capture finds a
#: spec by its function (:func:`spec_of_callable`)
REGISTRY: dict[str, OpSpec] = _by_name(ENTRIES)
#: the ops known by one function only, where another function shares its ``__name__``
BY_CALLABLE: tuple[OpSpec, ...] = tuple(spec for spec in ENTRIES if spec.callable)
#: anything else: no row, no names (a name that cannot be proven is not printed)
UNKNOWN = OpSpec("?", "new", None, row=False, words="")


# ---------------------------------------------------------------------------
# the functions the capture sees
# ---------------------------------------------------------------------------

#: where an op is found under its name (and aliases) when its spec names no single function
_OWNERS = ("torch.Tensor", "torch", "torch.nn.functional", "torch.special", "torch.linalg")


@functools.cache
def _owner(path: str):
    """``torch.Tensor`` (a class) or a module, by its dotted path."""
    module, _, attr = path.rpartition(".")
    if module and attr[:1].isupper():
        return getattr(importlib.import_module(module), attr)
    return importlib.import_module(path)


def _resolve(path: str):
    owner, _, name = path.rpartition(".")
    return getattr(_owner(owner), name, None)


def callables_of(spec: OpSpec) -> list[Callable]:
    """The functions ``spec`` is: the one its ``callable`` names, else every function torch has under its
    name or an alias (a property's getter for ``x.T``)."""
    if spec.callable:
        return [_resolve(spec.callable)]
    found: list[Callable] = []
    for owner in ("torch.Tensor",) if spec.getter else _OWNERS:
        where = _owner(owner)
        for name in (spec.name, *spec.aliases):
            f = getattr(where, name, None)
            if spec.getter and f is not None:
                found.append(f.__get__)
            elif callable(f) and not isinstance(f, type) and not any(f is g for g in found):
                found.append(f)
    return found


@functools.cache
def callable_index() -> dict[Callable, OpSpec]:
    """function -> its spec, for every function of every op (torch is imported here, on first use)."""
    found: dict[Callable, OpSpec] = {}
    for spec in ENTRIES:
        for f in callables_of(spec):
            found.setdefault(f, spec)
    return found


def spec_of_callable(func: Callable) -> OpSpec | None:
    """The spec of the function a call went to (None: the registry does not know it)."""
    try:
        return callable_index().get(func)
    except TypeError:   # a callable that cannot be hashed
        return None


# ---------------------------------------------------------------------------
# specs the inference makes from others
# ---------------------------------------------------------------------------

def _additive_params(args: tuple, kwargs: dict) -> dict:
    """Does the added tensor hide scores (values at or below -1e4: an additive mask)? Read on CPU only."""
    tensors = [a for a in args[:2] if _is_tensor(a)]
    if len(tensors) != 2:
        return {}
    mask = min(tensors, key=lambda t: t.numel())
    if mask.device.type != "cpu" or not mask.is_floating_point() or mask.numel() == 0:
        return {}
    return {"hides": bool(mask.min().item() <= -1e4)}


#: an addition onto attention scores gets a row of its own: it is where additive masks and biases go in
SCORE_ADD = OpSpec("add", "new", pr.broadcast, params=_additive_params, operands=all_operands, params_read_values=True,
                   words="adds a mask or bias to the scores", family=Family.ELEMENTWISE, meta="binary", additive=True)


#: a subtraction from attention scores that hides keys or slopes with distance gets one too: ``scores - bias``
#: adds ``-bias`` (FlexAttention's eager ``score_mod``, ``scores - 1e9 * (1 - mask)``)
SCORE_SUB = OpSpec("sub", "new", pr.broadcast, operands=all_operands, words="subtracts a mask or bias from the scores",
                   family=Family.ELEMENTWISE, meta="binary", additive=True)


#: a product of attention scores by a table over their queries and keys gets a row of its own: it is where
#: multiplicative masks and decays go in (RetNet's ``qk_mat * mask``, zeros where a key is not retained)
SCORE_MUL = OpSpec("mul", "new", pr.broadcast, operands=all_operands, words="weighs the scores by a table",
                   family=Family.ELEMENTWISE, meta="binary", scaling="multiplies")


@functools.cache
def by_parameter_matrix(spec: OpSpec) -> OpSpec:
    """A matrix product whose right operand is a 2-d matrix made from module parameters only (the
    inference knows which): the same op, named as a projection (:func:`.propagate.parameter_product`)."""
    return replace(spec, names=pr.parameter_product)


# ---------------------------------------------------------------------------
# facts asked of a spec, or of an op's name where the input is a name by nature
# ---------------------------------------------------------------------------

def spec_for(op: OpSpec | str) -> OpSpec:
    """The spec itself, or the spec of a name (:data:`UNKNOWN` for a name the registry does not know)."""
    return op if type(op) is OpSpec else REGISTRY.get(op, UNKNOWN)


def family_of(op: OpSpec | str) -> Family:
    """The family of an op (``swapaxes`` -> :attr:`Family.AXIS_ORDER`)."""
    return spec_for(op).family


def fails_on_strides(op: OpSpec | str) -> bool:
    """``view``/``view_as``: raise when the input's strides cannot express the new shape (reshape copies)."""
    return spec_for(op).stride_bound


def takes_shape_of_other(op: OpSpec | str) -> bool:
    return spec_for(op).shape_of_other


def short_name(op: OpSpec | str) -> str:
    spec = spec_for(op)
    return spec.short or (op if isinstance(op, str) else spec.name)


def moves_layout(op: OpSpec | str) -> bool:
    """Does ``op`` only move or re-read values (a view, a transpose, a slice, a contiguous copy)?"""
    return spec_for(op).moves_layout


def is_matrix_product(op: OpSpec | str) -> bool:
    """A product over the first operand's last axis and the second's second to last (``@``, mm, bmm,
    baddbmm): the product family, less einsum, whose subscripts say what it contracts."""
    return spec_for(op).matrix_product


def is_projection(op: OpSpec | str) -> bool:
    """A matrix product by a matrix of module parameters (``x @ self.w``: :func:`by_parameter_matrix`): a
    projection of the first operand's features, not a product of two tensors' tokens (q·kᵀ)."""
    return spec_for(op).names is pr.parameter_product


def is_basic_indexing(op: OpSpec | str) -> bool:
    """``x[index]``: which axes it keeps whole is read from the index (:func:`.writes.written_axes`)."""
    return spec_for(op).names is pr.getitem


def is_convolution(op: OpSpec | str) -> bool:
    """conv1d, conv2d, conv3d: a filter slid over positions (channels in, channels out)."""
    return spec_for(op).names is pr.conv


def is_recurrence(op: OpSpec | str) -> bool:
    """lstm, gru, rnn_tanh, rnn_relu (what ``nn.LSTM``/``nn.GRU``/``nn.RNN`` call): a run along the sequence
    whose outputs mix the tokens of the frame it is given, as an attention's do."""
    return spec_for(op).names is pr.recurrent


def contracts_by_subscripts(op: OpSpec | str) -> bool:
    """An einsum: what it contracts is in its recorded ``subscripts``."""
    return spec_for(op).by_subscripts


def lines_up_by_broadcast(op: OpSpec | str) -> bool:
    """Does ``op`` line its operands up by broadcasting (so lined-up axes must mean the same thing)?"""
    return spec_for(op).broadcasts


def write_kind(op: OpSpec | str) -> str | None:
    """``"whole"`` (``copy_``: broadcast onto all of it), ``"rows"`` (``index_copy_(dim, ...)``),
    ``"index"`` (``t[index] = v``), or None for an op that writes nothing."""
    return spec_for(op).write or None


def ops_of(family: Family) -> frozenset[str]:
    """Every op name of a family, aliases included (``matmul``, ``__matmul__``, ``mm``...)."""
    return frozenset(name for name, spec in REGISTRY.items() if spec.family is family)


def specs_where(fact: Callable[[OpSpec], bool]) -> tuple[OpSpec, ...]:
    """Every spec of the registry with a fact (``lambda s: s.chain == "method"``)."""
    return tuple(spec for spec in ENTRIES if fact(spec))


def record_params(spec: OpSpec, args: tuple, kwargs: dict) -> dict:
    """The structured parameters of one call (never raises: a parameter it cannot read is left out)."""
    if spec.params is None:
        return {}
    try:
        return {k: v for k, v in spec.params(args, kwargs).items() if v is not None}
    except (IndexError, TypeError, ValueError, AttributeError):
        return {}


def separated_axis(op: OpSpec | str, args: tuple, kwargs: dict, ndim: int) -> int | None:
    """The axis ``op`` takes apart: ``unbind(dim)``, ``chunk(n, dim)``, ``select(dim, i)``, or the one
    axis an index picks a single entry of (``x[..., 0, :]``, ``x[0]``)."""
    spec = spec_for(op)
    if spec.cuts_at:
        return arg(args, kwargs, spec.cuts_at, "dim", None if spec.picks else 0)
    item = args[1] if len(args) > 1 else None
    items = item if isinstance(item, tuple) else (item,)
    if sum(type(i) is int for i in items) != 1 or any(type(i) not in (int, slice, type(None), type(...))
                                                       for i in items):
        return None
    if ... in items:
        cut = items.index(...)
        before, after = items[:cut], items[cut + 1:]
        if any(type(i) is int for i in after):
            consumed = [i for i in after if i is not None]
            return ndim - len(consumed) + [i for i in after if i is not None].index(
                next(i for i in after if type(i) is int))
        items = before
    consumed = [i for i in items if i is not None]
    return next(k for k, i in enumerate(consumed) if type(i) is int)
