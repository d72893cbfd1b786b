"""What a module holds between calls, copied and put back: its submodules' attributes, buffers and
buffer values (a cache kept on ``self``, a buffer written in place).

The dependency check (:mod:`.dependencies`) runs the traced code's first top-level call again: on the
state that call found (copied when it began, :func:`snapshot`), and puts back the state the run left.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import torch

#: the most bytes of buffers copied to put them back after the measuring run (above: not measured)
BUFFER_LIMIT = 1 << 28
#: in a measuring call's arguments, where the input itself was passed again (``attn(x, x, x)``): the run gives
#: the moved input there too, so keys and values move with the queries they are
SAME_AS_INPUT = object()


def moved_with_input(where: list | dict, key, x) -> bool:
    """Whether a measuring call's argument ``where[key]`` is the input ``x`` itself (``attn(x, x, x)``'s keys), and
    if so marks it :data:`SAME_AS_INPUT`: the run gives it the moved input, as it gives the input."""
    if where[key] is not x:
        return False
    where[key] = SAME_AS_INPUT
    return True


def snapshot(module):
    """The attributes, buffers and buffer values of ``module`` and its submodules as they are now (when
    the traced code's first top-level call begins), to measure that call on the state it found; None
    where the buffers are too large to copy or live on the meta device (nothing is measured there)."""
    if any(b.is_meta for b in module.buffers()):
        return None
    return attributes(list(module.modules()))


def attributes(modules: list) -> list[tuple[Any, dict, dict, dict, dict]] | None:
    """Every module's attributes, buffers (and their values: a cache written in place) and
    parameters, to put back after the run; None when the buffers are too large to copy."""
    buffers = {id(b): b for m in modules for b in m._buffers.values() if isinstance(b, torch.Tensor)}
    if sum(b.numel() * b.element_size() for b in buffers.values()) > BUFFER_LIMIT:
        return None
    with torch.no_grad():
        return [(m, dict(m.__dict__), dict(m._buffers), dict(m._parameters),
                 {n: b.clone() for n, b in m._buffers.items() if isinstance(b, torch.Tensor)})
                for m in modules]


def restore(saved) -> None:
    """Put back what :func:`attributes` saved (a dict is rewritten only where the run changed it:
    rewriting an unchanged one would cost the next forward its attribute caches)."""
    for m, attrs, buffers, parameters, values in saved:
        for now, before in ((m.__dict__, attrs), (m._buffers, buffers), (m._parameters, parameters)):
            if not same(now, before):
                now.clear()
                now.update(before)
        if values:   # (no_grad entered only where there is a value to put back)
            with torch.no_grad():
                for name, value in values.items():
                    if buffers[name].shape == value.shape and not torch.equal(buffers[name], value):
                        buffers[name].copy_(value)


def same(now: dict, before: dict) -> bool:
    """Does ``now`` hold the very objects ``before`` held, under the same keys? (Read in their order
    first, in C: a dict the run left alone keeps its order.)"""
    if len(now) != len(before):
        return False
    if all(map(operator.is_, now, before)) and all(map(operator.is_, now.values(), before.values())):
        return True
    return all(now.get(k, same) is v for k, v in before.items())



def first_output(result):
    """What a module call returned, read as its output: the first item of a tuple or list, the first tensor of a
    mapping (transformers' ``ModelOutput``, in its fields' order: ``last_hidden_state``, ``logits``), else itself."""
    if isinstance(result, (tuple, list)):
        return result[0] if result else result
    if isinstance(result, Mapping):
        return next((v for v in result.values() if isinstance(v, torch.Tensor)), result)
    return result


def more_outputs(result, first) -> bool:
    """Did a module call return a floating-point tensor besides ``first`` (:func:`first_output`)? Trans2Seg's decoder
    returns its score maps ``[B, T, H, S]`` first, each key's column made of that key alone, and the class queries
    that read every key second: a contract read on the first output alone says nothing of the call's mixing."""
    items = result.values() if isinstance(result, Mapping) else result if isinstance(result, (tuple, list)) else ()
    return any(isinstance(v, torch.Tensor) and v is not first and v.is_floating_point() for v in items)


class Isolated:
    """A measuring run's context: eval mode, no gradients, every attribute, buffer and parameter put
    back afterwards; a run that raises (a batch size the model cannot take) is swallowed, and the
    context is falsy where the buffers are too large to save."""

    def __init__(self, module, state=None):
        self.module, self.ran, self.state = module, False, state

    def __enter__(self):
        self.modules = modules = list(self.module.modules())
        self.training = [(m, m.training) for m in modules if m.training]
        self.saved = attributes(modules)
        if self.saved is not None:
            if self.training:   # (in eval mode already: nothing to write)
                self.module.eval()
            self.grad = torch.no_grad()
            self.grad.__enter__()
        return self

    def __bool__(self) -> bool:
        return self.saved is not None

    def calling(self, args: tuple, kwargs: dict, position: int):
        """``run(x)``: the module's first output on its arguments with ``x`` at ``position`` and in place of
        every :data:`SAME_AS_INPUT` (the input passed again: ``attn(x, x, x)``'s keys and values)."""
        def run(xi):
            if self.state is not None:
                self._found()          # each measuring run starts from the state the call found
            given = [xi if i == position or a is SAME_AS_INPUT else a for i, a in enumerate(args)]
            named = {k: xi if a is SAME_AS_INPUT else a for k, a in kwargs.items()}
            result = self.module(*given, **named)
            self.ran = True
            return first_output(result)
        return run

    def _found(self) -> None:
        """Put back the state the call found (its training flags included: measured in eval mode),
        the forwards this check wrapped (:mod:`.head_hooks`, instance attributes) kept in front."""
        wrapped = [(m, m.__dict__["forward"]) for m in self.modules if "forward" in m.__dict__]
        restore(self.state)
        if any(m.training for m in self.modules) or any(m.training for m, *_ in self.state):
            self.module.eval()   # (a walk that sets every flag: only where one was put back in training)
        for m, forward in wrapped:
            m.__dict__["forward"] = forward

    def __exit__(self, kind, exc, tb) -> bool:
        if self.saved is not None:
            self.grad.__exit__(None, None, None)
            for m, mode in self.training:
                m.training = mode
            restore(self.saved)
        return kind is not None and issubclass(kind, Exception)   # (not measured: the caller reads None)


def entry_repeated(probe, entry: int = 0, times: int = 2) -> tuple[tuple, dict]:
    """The call's arguments (a :class:`.dependencies.Probe`'s) with every companion (a mask, a cross-attention's
    memory) cut to batch entry ``entry``, ``times`` over (the input passed again, as ``attn(x, x, x)``'s keys, moves
    with it: :func:`moved_with_input`): the entries of a measuring batch are all that entry of the input, so each
    must see its mask and memory (else a difference in those reads as a leak)."""
    args, kwargs = list(probe.args), dict(probe.kwargs)
    for key, axis in probe.companions:
        where = args if isinstance(key, int) else kwargs
        if moved_with_input(where, key, probe.args[probe.position]):
            continue
        if axis is None:   # (a list of one number per entry)
            where[key] = type(where[key])([where[key][entry]] * times)
            continue
        where[key] = torch.cat([where[key].narrow(axis, entry, 1)] * times, axis)   # (times, ...)
    return tuple(args), kwargs
