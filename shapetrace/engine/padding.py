"""A dependency contract on the padding: what a padded batch entry's real tokens give never reads its pads.

Where the traced call is given a padding mask beside its input (``model(ids, attention_mask)``,
``key_padding_mask``), the pads of a short sequence are there to be ignored: moving them may change nothing
at that sequence's real tokens' outputs (the padded queries' own outputs may read anything: transformers'
``_unmask_unattended`` opens them onto every key), nor an output without a token axis (a pooled vector). A
key padding mask not passed to one of the attentions, a mask inverted for some rows, a pooled CLS that reads
the pads (open_clip PR #312) break it.

**The mask** (:func:`padding_mask`) is found by what the probe (:class:`.dependencies.Probe`) already knows: a
companion cut along its batch axis, of two axes, the other one as long as the input's tokens (named as the
tokens where it has a name), holding two values (0/1 or bool), each row one run of each or a single value,
at least one row a single value (the longest sequence has no padding) and one row both (some entry is
padded); and by what the trace shows of its use: its values, alone or with constants, reach a call that
takes a mask (a ``masked_fill``, an attention's mask, an addition onto scores) or are multiplied into a
traced tensor (masked mean pooling); a lookup (token types) or other arithmetic is no such use. A second such
companion: which one is the padding cannot be told, nothing is measured. **Which value marks the padding**:
the value the unpadded rows hold is the real one (a row of padding alone is no sequence; unpadded rows that
disagree: nothing is measured), and the model's use must agree: both readings are measured in one forward at
batch 2 (entry 0: the first padded entry with the tokens the mask holds at 0 moved; entry 1: with those at 1
moved). The contract holds where the real tokens' outputs stay put; it is broken where they change and, read
the other way, the other side's outputs change too (whichever value marks the padding, a real token reads it),
or stay put only because a declared causal mask keeps later tokens unread (left padding); where the model
hides the side the unpadded rows call real, nothing is claimed either way (not measured, with why). Token
ids are moved where they become floats (:class:`.probe_inputs.AtEntry`), floats in a random direction, as
the other contracts move them. Plain data out, as :func:`.dependencies.measure`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from shapetrace.engine.capture import OpRecord, PassRecord
from shapetrace.engine.dependencies import BATCH, Probe, not_measured
from shapetrace.engine.directions import HIDES, where_params
from shapetrace.engine.kinds import Kind
from shapetrace.engine.module_state import Isolated, entry_repeated
from shapetrace.engine.op_args import first_operand
from shapetrace.engine.ops import is_convolution, is_recurrence
from shapetrace.engine.opspec import Family
from shapetrace.engine.probe_inputs import AtEntry, argument_name
from shapetrace.engine.propagate import same as same_axes
from shapetrace.engine.token_changes import change_tolerance, tokens_last

#: the contract's name, as the verdict lists it where it held
PADDING = "padding stays unread"


@dataclass(frozen=True)
class Mask:
    """A padding mask among the probe's companions: where it is, its name, which batch entry is padded (the
    first), that entry's row as bools (``ones[t]``: the mask holds 1 or True at token t) and the real value."""

    key: Any
    axis: int
    name: str
    entry: int
    ones: tuple[bool, ...]
    real: bool = True   # the value the unpadded rows hold (True: 1), the real tokens'


def padding_mask(probe: Probe, node_of=None, records=(), span: tuple[int, int] = (0, 0)) -> Mask | str | None:
    """The probe's padding mask (see the module's docstring), why the contract cannot be measured on the one
    found (a string), or None where no companion looks like one. ``node_of(tensor)``: the trace's node of a
    tensor; ``records``, ``span``: the capture's records and the top call's, where the mask's use is read."""
    found = [m for key, axis in probe.companions if axis is not None
             for m in [_candidate(probe, key, axis)] if m is not None]
    if not found:
        return None
    if len(found) > 1:
        names = " and ".join(m if isinstance(m, str) else m.name for m in found)
        return not_measured(f"two arguments look like padding masks, {names}: which one is cannot be told", PADDING)
    mask = found[0]
    if isinstance(mask, str):
        return not_measured(mask, PADDING)
    where = probe.args if isinstance(mask.key, int) else probe.kwargs
    node = node_of(where[mask.key]) if node_of is not None else None
    if node is None or not _masks(records, span, node):
        return not_measured(f"{mask.name} never reaches a mask on the scores nor is multiplied into the values",
                            PADDING)
    return mask


def _candidate(probe: Probe, key, axis: int) -> Mask | str | None:
    """A companion that holds a padding mask ``[B, T]`` (or ``[T, B]``), the reason it cannot be measured
    (every entry padded: which value is real cannot be told from the rows), or None (not a padding mask)."""
    where = probe.args if isinstance(key, int) else probe.kwargs
    m, x = where[key], probe.args[probe.position]
    if not isinstance(m, torch.Tensor) or m.dim() != 2 or m.is_meta or m.is_complex():
        return None
    if m.shape[1 - axis] != x.shape[probe.tokens] or m.shape[axis] != x.shape[probe.batch] or m.numel() > 1 << 16:
        return None
    values = m.detach().cpu()
    if not bool(((values == 0) | (values == 1)).all()):
        return None
    rows = (values != 0).movedim(axis, 0)                                         # (B, T) bool
    changes = (rows[:, 1:] != rows[:, :-1]).sum(1)                                # (B,) how often each row switches
    if int(changes.max()) > 1:
        return None   # (not one run of each value per row: not padding)
    padded = changes.nonzero().flatten().tolist()
    if not padded:
        return None
    full = rows[changes == 0, 0].unique().tolist()                               # the values unpadded rows hold
    if len(full) != 1:
        name = argument_name(probe.module, key)
        return f"every batch entry of {name} holds both values: which marks the padding cannot be read from a row " \
               "without any" if not full else f"the unpadded rows of {name} hold 0 in some and 1 in others"
    return Mask(key, axis, argument_name(probe.module, key), padded[0], tuple(rows[padded[0]].tolist()), full[0])


#: ops that carry a mask's values on (a cut, a view, an axis of one; and a cast: ``mask[:, None, None, :].float()``)
_CARRY = frozenset({Family.SLICE, Family.RESHAPE, Family.SIZE_ONE_AXIS, Family.EXPAND, Family.AXIS_ORDER,
                    Family.CONTIGUOUS})


def _masks(records, span: tuple[int, int], node: int) -> bool:
    """Is the mask (node ``node``) used as a padding mask: its values, or values made from them alone by
    elementwise ops (``(1 - mask) * min``, ``~mask``), given as the mask of a ``masked_fill`` or a ``where``, as
    an attention's mask (beyond query, key and value), added onto scores where they hide (``<= -1e4``), or its
    own 0/1 values multiplied into traced values (masked pooling)? A lookup (``token_type_embeddings(ids)``) or
    values made by other ops (``1 + flag``) are no such use."""
    same, derived = {node}, {node}   # (same: the mask's own values, cut, viewed or cast)
    dtypes: dict[int, torch.dtype] = {}   # (each node's dtype, where a recorded layout gave it)
    for r in range(*span):
        record = records[r]
        if type(record) is OpRecord:
            dtypes.update((n, raw[3]) for n, raw in zip((*record.ins, *record.outs), (*record.in_raw, *record.out_raw))
                          if isinstance(n, int))
        ins = record.ins if type(record) in (OpRecord, PassRecord) else ()
        mine = [i for i, n in enumerate(ins) if n in derived]
        if not mine:
            continue
        others = [i for i, n in enumerate(ins) if isinstance(n, int) and n not in derived]
        family = record.spec.family
        if others and _uses(record, mine, others, same):
            return True
        if others and not _indices_only(record, others, dtypes):
            continue   # (mixed with traced values by another op: no longer the mask's alone)
        if family not in _CARRY | {Family.ELEMENTWISE, Family.MASK_FILL, Family.JOIN} and not (
                not others and (family is Family.PRODUCT or _copies(record))):
            continue   # (a join with another mask, LUKE's words' and entities' masks, is still a mask; so are a
            # copy of it and its product with itself: RibonanzaNet's ``m = src_mask.clone()``, then the pair mask
            # ``matmul(m, m.permute(0, 2, 1))``)
        outs = [n for n in record.outs if isinstance(n, int)]
        derived.update(outs)
        if (family in _CARRY or _cast(record)) and not others and all(ins[i] in same for i in mine):
            same.update(outs)
    return False


def _copies(record) -> bool:
    """A copy of the values into a new buffer, each axis kept (``clone``, ``roll``, ``flip``)."""
    return record.spec.memory == "copy" and record.spec.names is same_axes


def _cast(record) -> bool:
    """A cast (``float``, ``to``, ``bool``, ``detach``: the registry's elementwise ops of one operand)."""
    return record.spec.family is Family.ELEMENTWISE and record.spec.operands is first_operand


def _indices_only(record, others: list[int], dtypes: dict[int, torch.dtype]) -> bool:
    """Are the other operands of ``record`` all integers or booleans (index grids, another boolean mask:
    ``padding[b, kv_idx] & causal``, torchtext T5's ``attn_mask.logical_or(key_padding_mask)``), so that what it
    makes is still made from the mask alone, as a mask? A call without a row of its own records no layouts: its
    operands' dtypes are those the calls that made them recorded (``dtypes``); unknown, it is not."""
    raw = getattr(record, "in_raw", None)
    if type(record) is OpRecord and raw is not None:
        return all(i < len(raw) and not raw[i][3].is_floating_point for i in others)
    known = [dtypes.get(record.ins[i]) for i in others]
    return all(dtype is not None and not dtype.is_floating_point for dtype in known)


def _uses(record, mine: list[int], others: list[int], same: set) -> bool:
    """Does ``record`` use the mask-made operands (positions ``mine``) as a padding mask (:func:`_masks`)?"""
    family, where = record.spec.family, record.spec.params is where_params
    if family in (Family.FUSED_ATTENTION, Family.MODULE_ATTENTION):
        return any(i >= 3 for i in mine)                    # (an attn_mask, a key_padding_mask)
    if family is Family.MASK_FILL or where:
        return 0 not in others and any(i >= 1 for i in others) if where else 0 in others
    if record.spec.additive and type(record) is OpRecord:
        kept = record.kept
        kept = kept[mine[0]] if isinstance(kept, tuple) and len(kept) > mine[0] else kept
        return isinstance(kept, torch.Tensor) and kept.is_floating_point() and kept.numel() > 0 \
            and float(kept.min()) <= HIDES
    return record.spec.scaling == "multiplies" and any(record.ins[i] in same for i in mine)


def measure_padding(probe: Probe, mask: Mask) -> tuple[list, list[str], list[str]]:
    """``(finding, held, not measured)`` of the padding contract on ``mask``'s padded entry (one forward at
    batch 2, three in training mode: the entry unmoved too)."""
    outs = _outputs(probe, mask)
    if isinstance(outs, str):
        return [], [], [not_measured(outs, PADDING)]
    alone, both = outs
    outs = tokens_last(torch.cat([alone, both], probe.out_batch).unsqueeze(0), probe)[0]   # (3, T or 1, rest)
    tolerance = change_tolerance(probe, outs[:1])
    changed = ((outs[1:] - outs[:1]).abs() > tolerance).any(-1) | (outs[1:].isnan() & ~outs[:1].isnan()).any(-1)
    ones = torch.tensor(mask.ones)
    if probe.out_tokens is None:
        reached = changed.any(-1).tolist()                                      # [zeros moved, ones moved]
        readings = [[0] if hit else [] for hit in reached]
    elif changed.shape[1] != len(mask.ones):
        return [], [], [not_measured("the output's tokens are not the mask's", PADDING)]
    else:   # reading 0 marks the padding: the ones are real, and moving the zeros may change none of them
        readings = [(changed[0] & ones).nonzero().flatten().tolist(), (changed[1] & ~ones).nonzero().flatten().tolist()]
    real_is_one = mask.real
    first, other = (readings[0], readings[1]) if real_is_one else (readings[1], readings[0])
    if not first:
        return [], [PADDING], []
    if other or _after(probe, mask, real_is_one):
        return [_finding(probe, mask, real_is_one, first, other)], [], []
    return [], [], [not_measured(f"the model hides the tokens where {mask.name} is {int(real_is_one)}, the value its "
                                 "unpadded rows hold: which value marks the padding cannot be told", PADDING)]


def _after(probe: Probe, mask: Mask, real_is_one: bool) -> bool:
    """Under a declared causal mask, does the padded entry's padding come before all its real tokens (left
    padding)? Read the other way, its real tokens would then be the later ones, which the causal mask alone
    keeps unread: that reading's holding says nothing of the padding."""
    return probe.causal is not None and mask.ones[0] != real_is_one   # (one run of each: the first token is a pad)


def _finding(probe: Probe, mask: Mask, real_is_one: bool, first: list[int], other: list[int]):
    """The broken contract, said with the reading the mask's unpadded rows give (their value is the real one);
    ``other``: what changed read the other way (nothing: the causal mask alone explains it, :func:`_after`)."""
    pad, real = (0, 1) if real_is_one else (1, 0)
    b = mask.entry
    if probe.out_tokens is None:
        what = f"the output of batch entry {b} (it has no token axis) changes"
        again = "it changes too" if other else "nothing changes (the causal mask alone keeps the later tokens unread)"
    else:
        what = f"the output at real token {first[0]} of batch entry {b} changes"
        again = f"output token {other[0]} changes" if other else \
            "nothing changes, but those are the later tokens, which the causal mask alone keeps unread"
    count = f" ({len(first)} real tokens in all)" if probe.out_tokens is not None and len(first) > 1 else ""
    return Kind.PADDING_READ.found(None, (
        f"measured on the values: {what} when only the padding of that entry changes{count}: the tokens where "
        f"{mask.name} is {pad}, as its unpadded rows read (they hold {real}); read the other way, moving only "
        f"the tokens where it is {real}, {again}. Whichever value marks the padding, a real token reads it: "
        "the mask is not passed to one of the attentions, is inverted for some rows, or a pooled token reads "
        "the pads."),
        f"Pass {mask.name} to every attention (and pooling) that reads these tokens, each key padding position "
        "hidden from every real query (a CLS or pooled token included).")


def _local_ops(records, span: tuple[int, int]) -> list[str]:
    """The names of the convolutions and recurrences the top call ran (they read each token's neighbours)."""
    start, end = span
    return [r.spec.name for r in records[start:end or None] if type(r) is OpRecord
            and (is_convolution(r.spec) or is_recurrence(r.spec))]


def _across_the_edge(found: list, local: list[str]) -> list:
    """``found`` as warnings where the model also ran a convolution or a recurrence: those read a token's
    neighbours, the padding next to the last real token included, and models that do not zero their pads before
    them are accepted as they are (wav2vec2's feature encoder on padded samples, a conformer's depthwise
    convolution); the read is then measured, but not proven to be a missing mask."""
    if not local:
        return found
    return [replace(d, severity="warning", message=d.message + (
        f" The model also runs {local[0]}, which reads each token's neighbours: a real token next to the padding "
        "reads it there too, which models that do not zero their pads first accept.")) for d in found]


def _outputs(probe: Probe, mask: Mask) -> tuple[torch.Tensor, torch.Tensor] | str:
    """``(alone, both)``: the padded entry's output in the traced batch, and the batch of two with that entry's
    tokens at 0 moved in its first entry and those at 1 in its second; why not, where the run cannot be made."""
    x, b = probe.args[probe.position], mask.entry
    with Isolated(probe.module, probe.state) as run:
        if not run:
            return "the model's buffers are too large to save and put back"
        args, kwargs = entry_repeated(probe, b, 3 if run.training else 2)
        call, first = run.calling(args, kwargs, probe.position), x.narrow(probe.batch, b, 1)
        n = 3 if run.training else 2
        if probe.entry is None:
            both = call(torch.cat([first] * n, probe.batch) + _moves(first, probe.batch, probe.tokens, mask, n))
        else:
            entry = probe.entry
            call = AtEntry(call, entry, lambda r: r + _moves(r.narrow(entry.batch, 0, 1), entry.batch, entry.tokens,
                                                             mask, n, r.shape[entry.batch] == n))
            both = call(torch.cat([first] * n, probe.batch))
            if not call.reached:
                return f"the measuring run did not reach {entry.label}, where the token ids become floats"
        if not isinstance(both, torch.Tensor) or not both.is_floating_point() or both.shape[probe.out_batch] != n:
            return "the measuring run's output has no batch of floating-point entries"
        if n == 3:
            return both.narrow(probe.out_batch, 0, 1), both.narrow(probe.out_batch, 1, 2)
        return probe.output.detach().narrow(probe.out_batch, b, 1), both
    return "the model cannot take a batch of two"


def _moves(first: torch.Tensor, batch: int, tokens: int, mask: Mask, n: int, ok: bool = True) -> torch.Tensor:
    """The moves, ``(n, ...)`` on the batch axis: the last two entries move the tokens where the mask is 0 and
    where it is 1, in a random direction scaled by (1 + the largest value); a leading entry (n = 3) is kept."""
    shape = list(first.shape)
    shape[batch] = n
    moves = torch.zeros(shape, dtype=first.dtype)
    if not ok:
        return moves.to(first.device)
    ones = torch.tensor(mask.ones)
    along = tokens - (tokens > batch)
    for i, side in ((n - 2, ~ones), (n - 1, ones)):
        rows = moves.select(batch, i)
        at = side.nonzero().flatten()
        picked = rows.index_select(along, at)
        picked = torch.randn(picked.shape, generator=torch.Generator().manual_seed(1 + i), dtype=first.dtype)
        rows.index_copy_(along, at, picked)
    scale = 1.0 + float(torch.linalg.vector_norm(first.detach().float(), float("inf")))
    return (moves * scale).to(first.device)


def padded(measured: tuple[list, list[str], list[str]], trace) -> tuple[list, list[str], list[str]]:
    """``measured`` (:func:`.dependencies.measure_trace`'s) with the padding contract added, where the batch held
    and the probe the trace measured (``trace.probe``) has a padding mask; nothing added where it has none."""
    found, held, unmeasured = measured
    probe = getattr(trace, "probe", None)
    if not isinstance(probe, Probe) or held[:1] != [BATCH] or probe.tokens_reason is not None:
        return measured
    capture = trace.capture
    mask = padding_mask(probe, capture.known_node, capture.records, capture.top_span)
    if mask is None:
        return measured
    if isinstance(mask, str):
        return found, held, [*unmeasured, mask]
    more, kept, why = measure_padding(probe, mask)
    local = _local_ops(capture.records, capture.top_span)
    if more and local and _edge_only(probe, mask):
        return found, held, unmeasured + why + [not_measured(
            f"the model's {local[0]} reads the pads next to the real tokens; the farthest pad, moved alone, "
            "changes nothing they give", PADDING)]
    return found + _across_the_edge(more, local), held + kept, unmeasured + why


def _edge_only(probe: Probe, mask: Mask) -> bool:
    """Where a convolution or a recurrence reads the pads: does moving only the pad farthest from the real
    tokens (of two or more) leave every real token's output (or the pooled output) as it was? A kernel reads
    the pads within its reach of the last real token; a missing mask (an attention, a mean over every
    position) reads every pad, the farthest too. One forward at batch 2 (:func:`_outputs`)."""
    pads = [t for t, one in enumerate(mask.ones) if one != mask.real]
    if len(pads) < 2:
        return False
    far = pads[-1] if pads[-1] == len(mask.ones) - 1 else pads[0]
    alone = replace(mask, ones=tuple((t != far) == mask.real for t in range(len(mask.ones))))
    outs = _outputs(probe, alone)
    if isinstance(outs, str):
        return False
    outs = tokens_last(torch.cat(outs, probe.out_batch).unsqueeze(0), probe)[0]   # (3, T or 1, rest)
    moved = outs[1 if mask.real else 2]                                            # (the far pad's entry)
    tolerance = change_tolerance(probe, outs[:1])
    changed = ((moved - outs[0]).abs() > tolerance).any(-1) | (moved.isnan() & ~outs[0].isnan()).any(-1)
    if probe.out_tokens is not None:
        changed = changed[torch.tensor([one == mask.real for one in mask.ones])]
    return not bool(changed.any())
