"""What a measuring run of the dependency contracts (:mod:`.dependencies`) feeds the model.

**Token ids, moved where they become floats.** Noise cannot be added to token ids (CLIP's text encoder,
GPT-2 and BERT take ids alone). The ids become floats at one op: a lookup into a table the model holds
(an embedding). :func:`entry_of` finds it in the top call's records: the one op that reads the ids (or
integers made from them alone) and makes a floating-point result without reading another traced float
(``hidden[arange(B), eot]`` reads ``hidden``: the ids only pick there). Where two ops make floats from the
ids alone (an embedding and ``(ids == pad).float()``), which one carries the tokens cannot be told:
nothing is moved.

During the measuring run (:mod:`.dependencies`), which feeds batch entry 0's ids twice,
:class:`EntryMode` meets that op again by its call site and how many times that site ran before (as
:mod:`.heads` meets its splits) and hands the model its result with entry 1's last token moved; the
token contracts then read the outputs as they do for a floating-point input.

**Companions, cut to batch entry 0** (:func:`companions`): every other tensor argument (a mask, a
cross-attention's memory, position ids) is cut to entry 0 along its batch axis, where a name proves which
axis that is. One with an unnamed axis as long as the batch is cut there only where it is its only such
axis and holds the same values all along it (positions built ``arange(T).unsqueeze(0).expand(B, T)``):
every entry of it is entry 0, so the cut gives the measuring run what entry 0 saw whichever axis the
model reads as the batch (where that axis were not the batch, the model would meet a size it cannot
take, and the run would say it could not be measured). Otherwise the contracts are not measured, and
the reason says which argument stopped them.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from shapetrace.engine.capture import _SPECS, OpRecord, _spec_of
from shapetrace.engine.opspec import Family
from shapetrace.engine.reductions import axes_along
from shapetrace.engine.sites import user_stack
from shapetrace.engine.unread import token_offsets


def input_of(args, entry_of) -> tuple[int | None, Any]:
    """``(position, entry)``: the first floating-point tensor argument (entry None); else the first
    integer one, with where it becomes floats (:mod:`.probe_inputs`) or why it does not."""
    tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    floats = [i for i, a in tensors if a.is_floating_point()]
    if floats:
        return floats[0], None
    ids = next((i for i, a in tensors if not a.is_complex() and a.dtype != torch.bool), None)
    if ids is None:
        return None, None
    entry = entry_of(args[ids]) if entry_of is not None else "the input is integer token ids"
    return ids, entry


def argument_name(module, key) -> str:
    """An argument's name in the module's ``forward`` (``"position_ids"``), else ``"argument 2"``."""
    if isinstance(key, str):
        return key
    try:
        names = [p.name for p in inspect.signature(module.forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError, AttributeError):
        names = []
    return names[key] if key < len(names) else f"argument {key + 1}"


@dataclass(frozen=True)
class Entry:
    """The op where the ids become floats: its call as the measuring run meets it (:class:`.heads.Call`),
    its label (``"#1 embedding"``) and its result's batch and token axes."""

    call: Any
    label: str
    batch: int
    tokens: int


def entry_of(records, span: tuple[int, int], ids: int, labels_of: Callable[[int], tuple], role_of,
             event_of_record: dict) -> Entry | str:
    """The op of the top call (records ``span``) that turns the ids (node ``ids``) into floats, or why
    there is none to move (for the verdict). ``labels_of(node)``: a node's axis names."""
    from shapetrace.engine.heads import NotMeasured, _Calls

    start, end = span
    derived, found = {ids}, []
    for r in range(start, end):
        record = records[r]
        if not any(n in derived for n in record.ins):
            continue
        if type(record) is OpRecord and _makes_floats(record, derived):
            found.append(r)
        else:
            derived.update(record.outs)   # (integers made from the ids: a view, a cast to long, a sum...)
    if not found:
        return "no op turns the token ids into floats"
    labels = [f"#{event_of_record[r]} {records[r].spec.name}" for r in found if r in event_of_record]
    if len(found) > 1:
        return f"the token ids turn into floats along {len(found)} paths (first seen at {' and '.join(labels)}): " \
               "which one carries the tokens cannot be told"
    r = found[0]
    axes = _axes(labels_of(records[r].outs[0]), role_of)
    if axes is None:
        return f"the token axes of {labels[0] if labels else records[r].spec.name}'s result have no names"
    try:
        call = _Calls(records, start, end)(r)
    except NotMeasured:
        return f"{records[r].spec.name} has no row of its own"
    return Entry(call, labels[0] if labels else records[r].spec.name, *axes)


def _makes_floats(record: OpRecord, derived: set) -> bool:
    """Does ``record`` make a floating-point result from the ids alone (every float it reads is a table
    the model holds, not a traced tensor)?"""
    if not record.out_raw or not record.out_raw[0][3].is_floating_point:
        return False
    return not any(n not in derived and raw[3].is_floating_point for n, raw in zip(record.ins, record.in_raw))


def _axes(labels: tuple, role_of) -> tuple[int, int] | None:
    roles = [role_of(label) if label else None for label in labels]
    if roles.count("batch") != 1 or roles.count("tokens") != 1:
        return None
    return roles.index("batch"), roles.index("tokens")


class EntryMode(TorchFunctionMode):
    """During the measuring run: at the entry op, its result with entry 1's last token moved
    (``move(result)``); ``reached`` says whether the run got there."""

    def __init__(self, entry: Entry, move: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.entry, self.move = entry, move
        self.seen, self.reached = 0, False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        spec = (_SPECS.get(func) or _spec_of(func))[1]
        if self.seen > self.entry.call.occurrence or spec is not self.entry.call.spec:
            return result
        codes, offset = user_stack(sys._getframe(1))
        if (codes[0] if codes else None, offset) != (self.entry.call.code, self.entry.call.offset):
            return result
        self.seen += 1
        if self.seen <= self.entry.call.occurrence or not self._as_traced(result):
            return result   # (not the entry, or not a result like the traced one: nothing moved, the run says so)
        self.reached = True
        return self.move(result)

    def _as_traced(self, result) -> bool:
        """Is ``result`` a floating-point tensor with the entry's axes, at the measuring batch of two?"""
        axes = self.entry.batch, self.entry.tokens
        return isinstance(result, torch.Tensor) and result.is_floating_point() and result.dim() > max(axes) \
            and result.shape[self.entry.batch] == 2


class AtEntry:
    """``call(x)`` under a fresh :class:`EntryMode` each time (the heads check may run it twice);
    ``reached``: whether its last run moved the entry's result."""

    def __init__(self, call: Callable, entry: Entry, move: Callable[[torch.Tensor], torch.Tensor]):
        self.call, self.entry, self.move, self.reached = call, entry, move, False

    def __call__(self, x):
        mode = EntryMode(self.entry, self.move)
        with mode:
            result = self.call(x)
        self.reached = mode.reached
        return result


def companions(args, kwargs, position: int, batch: int, labels_of, role_of, module=None,
               per_entry: tuple = (), tokens: int = 0, length: int = 0) -> tuple | str:
    """``((position or keyword, batch axis), ...)`` for every tensor argument but the input that has a
    batch axis (see the module's docstring), and ``(position or keyword, None)`` for every list of
    numbers ``per_entry`` declares; why not, where one has an unnamed axis as long as the batch that
    cannot be cut (which of its axes is the batch cannot be told, and sizes never decide it), or an
    undeclared list of numbers is as long as the batch (a padding length per entry, as
    ``model(x, pad=[0, 2])``: which goes with which entry cannot be told). ``tokens``: where names were found
    from sizes alone, the input's length: token ids (not a 0/1 mask, not positions) of a sequence as long (a
    decoder's target ids beside the memory it is given) stops the measure, since which of the two the
    output's tokens follow cannot be told, and sizes never decide it. ``length``: the input's number of tokens; a
    tensor of offsets into them (:func:`_token_offsets`) is no companion, however long."""
    found = []
    others = [(i, a) for i, a in enumerate(args) if i != position] + list(kwargs.items())
    for key, a in others:
        if tokens and (why := _second_sequence(a, tokens, labels_of, role_of)):
            return f"names were found from sizes alone, and {argument_name(module, key)} {why}"
        if _numbers(a) and len(a) == batch:
            if key not in per_entry:
                return f"{argument_name(module, key)} is a list of {len(a)} numbers, as many as the batch's " \
                       "entries: which goes with which entry cannot be told"
            found.append((key, None))
            continue
        if not isinstance(a, torch.Tensor) or a.dim() == 0 or (length and token_offsets(a, {length})):
            continue
        labels = labels_of(a)
        named = [i for i, label in enumerate(labels) if label and role_of(label) == "batch"]
        unnamed = [i for i, size in enumerate(a.shape) if size == batch and not (labels and labels[i])]
        if len(named) == 1 and a.shape[named[0]] == batch:
            found.append((key, named[0]))
        elif not named and unnamed:
            if len(unnamed) > 1 or not _same_along(a, unnamed[0]):
                return f"{argument_name(module, key)} {list(a.shape)} has an unnamed axis as long as the batch: " \
                       "which of its axes is the batch cannot be told"
            found.append((key, unnamed[0]))
    return tuple(found)


def _second_sequence(a, tokens: int, labels_of, role_of) -> str | None:
    """What makes ``a`` a second sequence ``tokens`` long (see :func:`companions`): integer ids that neither
    hold 0/1 (a mask) nor run up along those tokens (positions); else None. Floats are never one (a key beside
    its query, an additive mask: the same sequence or none)."""
    if not isinstance(a, torch.Tensor) or a.is_floating_point() or a.is_complex() or a.dtype == torch.bool \
            or a.dim() < 2 or a.is_meta or a.numel() > (1 << 16):
        return None
    labels = labels_of(a) or (None,) * a.dim()
    axes = [i for i, (n, lab) in enumerate(zip(a.shape, labels))
            if n == tokens and not (lab and role_of(lab) == "batch")]
    if not axes or bool(((a == 0) | (a == 1)).all()) or bool((a.diff(dim=axes[0]) >= 0).all()):
        return None
    return f"{list(a.shape)} holds a sequence as long as the input's: which one the output's tokens follow " \
           "cannot be told"


def _numbers(a) -> bool:
    """Is ``a`` a list or tuple of plain numbers?"""
    return isinstance(a, (list, tuple)) and bool(a) and all(isinstance(n, (int, float)) for n in a)


def _same_along(a: torch.Tensor, axis: int) -> bool:
    """Does ``a`` hold the same values in every entry along ``axis`` (an expanded axis, stride 0)?"""
    if a.stride(axis) == 0:
        return True
    if a.is_meta or a.numel() > (1 << 16):
        return False
    first = a.narrow(axis, 0, 1)                                                   # (..., 1, ...)
    return bool((a == first).all())


def other_sequence(labels_in, tokens_in: int, labels_out, tokens_out: int | None) -> str | None:
    """Why the output's tokens cannot be compared position by position with the input's: they are another
    sequence's (``nn.Transformer(src, tgt)``: the first input holds the source's ``S`` frames, the output the
    target's ``T`` tokens), or None (the same sequence, grown or cut: ``N`` and ``1+N``, ``T`` and ``T[-1:]``)."""
    if tokens_out is None:
        return None
    mine, theirs = labels_in[tokens_in], labels_out[tokens_out]
    words = [{w for w in re.split(r"\W+", label.split("[", 1)[0]) if w and not w.isdigit()} if label else set()
             for label in (mine, theirs)]
    if not all(words) or words[0] & words[1]:
        return None
    return f"the input's tokens ({mine}) are another sequence than the output's ({theirs})"


#: a label of a pick by an index the code named (``B[beam_idx]``), not a cut (``B[0:2]``) nor a slice's end
_PICKED_BY = re.compile(r"(?P<root>\w+)\[(?P<index>[A-Za-z_]\w*)\]")


def batch_reordered(events, role_of) -> str | None:
    """Why the batch contract cannot be measured where the code itself moves batch entries: a pick along the
    batch by an index it computed (a beam search's ``cache.index_select(1, beam_idx)``, ``beam_idx`` ranked from
    every entry's scores), after which each entry's output depends on the others' by design; else None."""
    for e in events:
        for info in e.outputs:
            for label in info.dims or ():
                m = _PICKED_BY.fullmatch(label or "")
                if m and role_of(m.group("root")) == "batch":
                    return (f"the code reorders its batch entries by an index, {label} at {e.op} #{e.index}, so each "
                            "entry's output may depend on the others by design")
    return None


def batch_attended(events, role_of) -> str | None:
    """Why the batch contract cannot be measured where the code itself makes the batch entries attend to each
    other: a softmax along an axis named by the batch (of more than one entry) in weights with no token axis
    beside it, the tokens folded into each entry's features first (SAINT's intersample attention,
    ``rearrange(x, 'b n d -> 1 b (n d)')``: the rows of a table are the tokens by design); else None. Seq-first
    code fed ``[B, T, D]`` keeps its tokens in a batch axis beside such weights, and stays measured."""
    for e in events:
        if e.spec is None or e.spec.family is not Family.SOFTMAX or not e.inputs:
            continue
        t = e.inputs[0]
        along = axes_along(Family.SOFTMAX.value, e.params, len(t.shape))
        labels = t.dims or ()
        if not along or along[0] >= len(labels) or t.shape[along[0]] < 2:
            continue
        label = labels[along[0]]
        if label and role_of(label) == "batch" and not any(lab and role_of(lab) == "tokens" for lab in labels):
            return (f"the code attends across its batch entries: {e.op} #{e.index} weighs the {label} entries "
                    "against each other, no token axis beside them, so each entry's output depends on the others "
                    "by design")
    return None
