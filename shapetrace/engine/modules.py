"""Module paths while a trace records: which ``nn.Module`` each call ran in, named after the run.

:class:`ModulePaths` wraps ``nn.Module._call_impl`` for the length of a trace and keeps the capture's
stack of module slots current; :class:`ModuleCalls` names those slots (``h.3.attn``) when first asked.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import torch
from torch.nn import Module

from shapetrace.engine.module_state import snapshot
from shapetrace.engine.sites import OUTER, module_wrapper, user_stack
from shapetrace.engine.unread import FirstCall, note_arguments, note_end

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.capture import Capture


class ModulePaths:
    """Keeps the capture's module path stack current while the traced code runs.

    It wraps ``nn.Module._call_impl`` (what ``Module.__call__``, torch's ``_wrapped_call_impl``, calls
    for every module not compiled) for the length of the trace rather than registering global module
    hooks: any global hook sends every module call down torch's slow path (measured on the whole-model
    benchmark: about 25 µs per module call), while this wrapper costs a few. Not ``__call__`` itself:
    setting a special method on a class updates its slot in every subclass, and ``nn.Module`` has
    hundreds (measured with 900: 160 µs to put the wrapper on and take it off, against 7 µs for
    ``_call_impl``; in the suite's corpus worker 1.1 ms a trace). Paths are relative to the outermost
    module the traced code calls (``h.3.attn``)."""

    def __init__(self, capture: Capture):
        self.capture = capture
        self.original = None
        self.wrapper = None

    def install(self) -> None:
        capture, original = self.capture, Module._call_impl
        slots, outer = capture.modules, OUTER
        calls = capture.module_calls
        seen, first = calls.seen, calls.first

        def call_in_path(module, *args, **kwargs):
            slot = seen.get(id(module))
            if slot is None:   # its first call: named after the run (ModuleCalls), from where it ran first
                slot = seen[id(module)] = len(first)
                first.append((module, slots[-1] if slots else -1))
            slots.append(slot)
            outer.append(user_stack(sys._getframe(1)))   # the user code above this call (torch's frames skipped)
            start = len(capture.records)
            if len(slots) == 1 and calls.first_call is None:
                note_arguments(capture, module, args, kwargs, start)
            state = _state_when_called(module) if len(slots) == 1 and capture.keep_top_call \
                and capture.top_call is None else None
            try:
                result = original(module, *args, **kwargs)
                if len(slots) == 1:
                    note_end(capture, result)
                if len(slots) == 1 and capture.keep_top_call and capture.top_call is None:
                    capture.top_call = (module, args, kwargs, result, state)
                    capture.top_span = (start, len(capture.records))
                return result
            finally:
                if slots:   # (empty if the trace was left while this module ran)
                    del slots[-1]
                if outer:
                    del outer[-1]

        module_wrapper(call_in_path.__code__)
        self.original, self.wrapper = original, call_in_path
        Module._call_impl = call_in_path

    def remove(self) -> None:
        if self.original is not None and Module._call_impl is self.wrapper:
            Module._call_impl = self.original   # not if the traced code put its own wrapper on top since
        self.original = None


def _state_when_called(module: Module):
    """The module's state as the traced code's first top-level call finds it (unrecorded): the dependency
    check runs that call again on this state, not on what later calls (a decode loop's cache) left."""
    with torch._C.DisableTorchFunction():   # (copying the buffers is not the traced code's work)
        return snapshot(module)


class ModuleCalls:
    """The modules the traced code called, in the order of their first call, named when first asked.

    While the code runs, a module call costs one lookup: its *slot* (the index of its first call) and
    the slot of the module it first ran in. Paths (``h.3.attn``, relative to the outermost module the
    traced code calls) are made from those after the run, in first-call order: a module's path is the
    one it had where it first ran, read from the module tree as it stands when first asked (a submodule
    the traced code adds or removes while it runs is named from the tree after it). The modules are
    held only until they are named (:meth:`settle`), so no id in ``seen`` is reused meanwhile."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}           # id(module) -> slot
        self.first: list[tuple] = []            # slot -> (module, the slot it first ran in, or -1)
        self.paths: list[tuple[str, str]] = []  # slot -> (path, class name), as named so far
        self._names: dict[int, str] = {}
        #: the first outermost call (:class:`.unread.FirstCall`); None before it
        self.first_call: FirstCall | None = None
        #: ``(path, attribute, value)``: each window a called module holds (:func:`configured_windows`)
        self.windows: list[tuple[str, str, int]] = []
        #: ``(path, attribute)``: each flag by which a called module declares itself causal (:func:`declared_causal`)
        self.causal: list[tuple[str, str]] = []
        #: ``(path, attribute, pairing)``: each flag by which a called module says how its rotary pairs features
        #: (:func:`declared_pairings`)
        self.pairings: list[tuple[str, str, str]] = []

    def path(self, slot: int) -> str:
        """The module path of ``slot`` ("" outside any module)."""
        paths = self.paths
        if slot < len(paths):   # named already (or -1: outside any module)
            return paths[slot][0] if slot >= 0 else ""
        return self._named(slot)[0]

    def type_name(self, slot: int) -> str:
        return self._named(slot)[1] if slot >= 0 else ""

    def _named(self, slot: int) -> tuple[str, str]:
        paths = self.paths
        while len(paths) <= slot:
            module, parent = self.first[len(paths)]
            path = self._names.get(id(module))
            if path is None:
                prefix = paths[parent][0] + "." if parent >= 0 and paths[parent][0] else ""
                path = _name_submodules(module, prefix, self._names)
            paths.append((path, type(module).__name__))
        return paths[slot]

    def holds(self, slots: list[int], t) -> bool:
        """Is ``t`` a registered buffer or a tensor attribute of a module running now (``slots``)? The
        model's own tensor (Swin's index, T5's buckets, a rotary table), not an input the sizes describe."""
        first = self.first
        for slot in slots:
            module = first[slot][0] if 0 <= slot < len(first) else None
            if module is not None and any(v is t for held in (module._buffers, module.__dict__) for v in held.values()):
                return True
        return False

    def settle(self) -> None:
        """The run ended: name every module called, then let the modules go."""
        if self.first:
            self._named(len(self.first) - 1)
        self.windows += [(self.paths[slot][0], *held) for slot, (module, _) in enumerate(self.first)
                         if module is not None for held in configured_windows(module)]
        self.causal += [(self.paths[slot][0], name) for slot, (module, _) in enumerate(self.first)
                        if module is not None for name in declared_causal(module)]
        self.pairings += [(self.paths[slot][0], *held) for slot, (module, _) in enumerate(self.first)
                          if module is not None for held in declared_pairings(module)]
        self.first = [(None, parent) for _, parent in self.first]
        self.seen.clear()


def configured_windows(module) -> list[tuple[str, int]]:
    """``(attribute, value)`` for each positive int a module holds under a name that says window
    (``sliding_window``, ``window_size``, ``window``), on itself or on a settings object it holds
    (``self.config.window_size``: transformers' GPT-Neo and Mistral read theirs there): the width a reader of
    the model checks a sliding-window mask against (:func:`.rules.directions.window_widths`). Read after the
    run, from the module itself and one level into plain objects (never another module or a tensor)."""
    return [(name, value) for name, value in _settings(module)
            if _names_a_width(name.rsplit(".", 1)[-1].lower()) and type(value) is int and value > 0]


def _names_a_width(leaf: str) -> bool:
    """Does an attribute's name say a window's width: ``window`` in it, and no count of layers or a layers' pattern
    (transformers' ``sliding_window_pattern = 4``: every 4th layer; Qwen2's ``max_window_layers``)?"""
    return "window" in leaf and "pattern" not in leaf and "layer" not in leaf


#: the boolean attributes a reader checks to know that a module is causal (``self.is_decoder``, ``config.is_causal``)
CAUSAL_FLAGS = frozenset({"is_causal", "is_decoder", "causal", "causal_mask"})


def declared_causal(module) -> list[str]:
    """The attributes by which a module declares itself causal: a bool ``True`` under one of
    :data:`CAUSAL_FLAGS`, on itself or one level into a settings object it holds (``config.is_decoder``:
    transformers' RoFormer, BERT and T5 read theirs there). Never a module's class name, never a tensor
    (a ``causal_mask`` buffer is a mask, not a flag): what the model says it is, which the attention it
    runs is then compared with (:mod:`.declared`)."""
    return [name for name, value in _settings(module)
            if name.rsplit(".", 1)[-1] in CAUSAL_FLAGS and value is True]


#: the boolean attributes that say how a rotary embedding pairs its features, and the pairing each says when True
#: (False says the other): vLLM's ``is_neox_style`` (True: feature i with i + d/2, ``rotate_half``), flash-attn's and
#: Transformer Engine's ``interleaved`` and Megatron's ``config.rotary_interleaved`` (True: 2k with 2k + 1, GPT-J's)
PAIRING_FLAGS = {"is_neox_style": "halves", "neox_style": "halves", "interleaved": "interleaved",
                 "rotary_interleaved": "interleaved", "rope_interleaved": "interleaved",
                 "is_interleaved": "interleaved"}
#: the pairing a flag of :data:`PAIRING_FLAGS` says when it is False
_OTHER_PAIRING = {"halves": "interleaved", "interleaved": "halves"}


def declared_pairings(module) -> list[tuple[str, str]]:
    """``(attribute, pairing)`` for each bool a module holds under a name of :data:`PAIRING_FLAGS`, on itself or
    one level into a settings object (``config.rotary_interleaved``): how the model says its rotary pairs
    features (``"halves"`` or ``"interleaved"``), which the rotation it runs is then compared with
    (:func:`.rules.rotary.rotary_pairing`). Read after the run, never from a class name or a tensor."""
    return [(name, said if value else _OTHER_PAIRING[said]) for name, value in _settings(module)
            if type(value) is bool and (said := PAIRING_FLAGS.get(name.rsplit(".", 1)[-1])) is not None]


def _settings(module) -> list[tuple[str, object]]:
    """``(attribute, value)`` for everything a module holds in its ``__dict__`` and one level into each plain
    object there (``config.sliding_window``; never another module, a tensor, a class or a callable)."""
    found = list(vars(module).items())
    for name, value in vars(module).items():
        if not isinstance(value, (Module, torch.Tensor, type)) and hasattr(value, "__dict__") \
                and not callable(value):
            found += [(f"{name}.{inner}", v) for inner, v in vars(value).items()]
    return found


def _name_submodules(module, prefix: str, names: dict[int, str]) -> str:
    """Name ``module`` and every module under it (``prefix`` + its path inside ``module``) the first
    time it runs; the names of modules already named stay. Returns ``module``'s path."""
    for name, sub in module.named_modules():
        names.setdefault(id(sub), (prefix + name).strip("."))
    return names.get(id(module), type(module).__name__)


#: Methods that build or transform a model rather than run it: a module's constructor, a deep copy of a
#: tensor or parameter (``clones()`` of the Annotated Transformer), ``.to()``/``.half()`` (``_apply``) and
#: loading weights. An op that runs inside one of them, outside any module's forward, is setup.
_BUILDING = frozenset({"__init__", "__deepcopy__", "_apply", "load_state_dict", "_load_from_state_dict"})


def building_a_model(frame) -> bool:
    """True when ``frame`` (or a caller of it) is one of :data:`_BUILDING` called on a module or a tensor:
    the op being recorded builds a model (initialises a weight, fills a ``tril`` buffer, deep-copies a
    layer), so it is not part of the forward pass the table is about."""
    while frame is not None:
        if frame.f_code.co_name in _BUILDING:
            owner = frame.f_locals.get("self")
            if isinstance(owner, (Module, torch.Tensor)):
                return True
        frame = frame.f_back
    return False
