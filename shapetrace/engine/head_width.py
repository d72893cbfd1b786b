"""The heads' width where the model's own head split proves it is not ``D / H`` (Gemma's 256 of 3072 / 16,
Qwen3-0.6B's 128 of 1024 / 16, Mistral-Nemo's 128 of 5120 / 32).

``--dims "D=32 H=4"`` derives ``d_k = D / H = 8``. A model whose ``head_dim`` is set apart from its width
projects the queries to ``H · head_dim`` features and splits them ``view(B, T, H, head_dim)``: no axis of
those is ``D`` or ``d_k``, so nothing past the projection got a name, and each key and value projection
whose width happened to be ``D`` was named so. Where every such split of a projection's features (or of a
piece cut from them: a fused q/k/v projection split first) puts the declared heads (``H``, or ``H_kv``) on
the outer axis and one width ``w ≠ D / H`` on the last, and queries meet keys over ``w`` features (a
product contracting ``w``, or a fused attention of ``w``-wide queries: not GPT-NeoX's per-head fused
``3·d_k``), the capture is inferred again as if ``d_k = w`` had been given (:meth:`.tracer.Trace._inferred`). The split
fixes which factor is the heads: an outer axis of the declared head count, the inner one the width; a
width equal to a head count decides nothing (``H × H`` splits either way), and two widths, none.

Reads: a capture's records and nodes. Nothing here runs torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from shapetrace.engine.axis_compute import einsum_contracted
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.namer import Namer
from shapetrace.engine.op_args import parse_einsum
from shapetrace.engine.ops import Family
from shapetrace.engine.thawed import thaw_args

#: families a projection's features pass through to the head split unchanged in meaning: a piece of them
_PIECES = frozenset({Family.SPLIT, Family.SLICE})


def with_head_width(trace, inference):
    """``inference`` (of ``trace``'s capture, its run ended), or the capture inferred again with the namer
    :func:`namer_with_head_width` makes, which the trace then keeps (its ``namer``, ``dims`` and
    ``head_width``)."""
    from shapetrace.engine.infer import Inference

    namer = namer_with_head_width(trace.capture, trace.namer)
    if namer is None:
        return inference
    trace.namer, trace.dims, trace._head_width = namer, namer.dims, namer.dims["d_k"]
    again = Inference(trace.capture, namer, namer.dims, trace.seed_order)
    again.advance()
    return again


def namer_with_head_width(capture, namer: Namer) -> Namer | None:
    """A namer of ``namer``'s sizes with ``d_k`` the width :func:`proven_head_width` reads from ``capture``,
    where ``namer`` derived ``d_k = D / H`` and the model proves another; else None."""
    if not namer.derived_head_width:
        return None
    width = proven_head_width(capture.records, capture.nodes, namer.dims)
    if width is None:
        return None
    given = {k: v for k, v in namer.dims.items() if k != "d_k"}
    return Namer({**given, "d_k": width}, declared_roles=dict(namer.declared_roles))


def proven_head_width(records: Sequence, nodes: Sequence, dims: Mapping[str, int]) -> int | None:
    """The width ``w`` every split of a projection's features into heads shows, where it is not ``D // H``;
    None where no such split, where two widths, or where one split is ``H × D / H``."""
    heads, width = dims.get("H"), dims.get("D")
    if not heads or not width or width % heads:
        return None
    counts = {heads, dims.get("H_kv")} - {None}
    made: dict[int, OpRecord] = {}
    found: set[int] = set()
    for record in records:
        if type(record) is not OpRecord or record.error:
            continue
        if record.spec.family is Family.RESHAPE and len(record.ins) == 1 and len(record.outs) == 1 \
                and _from_projection(made, record.ins[0]):
            split = _heads_split(tuple(nodes[record.ins[0]].shape), tuple(record.out_raw[0][0]), counts)
            if split is not None:
                found.add(split[1])
        for node in record.outs:
            made[node] = record
    if len(found) != 1:
        return None
    (w,) = found
    if w == width // heads or w in counts or not _attends_over(records, nodes, w):
        return None
    return w


def _attends_over(records: Sequence, nodes: Sequence, w: int) -> bool:
    """Do queries and keys meet over features of width ``w``: a fused attention whose queries are ``w``
    wide, or a matrix product ``[..., T, w] @ [..., w, S]``? A split that only fuses per head (GPT-NeoX's
    ``view(B, T, H, 3·d_k)``, cut into q, k and v after) shows another width than the one attention reads."""
    for record in records:
        if type(record) is not OpRecord or record.error or len(record.ins) < 2:
            continue
        a, b = (tuple(nodes[n].shape) for n in record.ins[:2])
        if record.spec.family is Family.FUSED_ATTENTION and a and a[-1] == w:
            return True
        if record.spec.family is Family.PRODUCT and (len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2] == w
                                                     or w in _contracted(record, a, b)):
            return True
    return False


def _contracted(record: OpRecord, a: tuple[int, ...], b: tuple[int, ...]) -> set[int]:
    """The sizes an ``einsum`` of two operands sums over (lucidrains' ``einsum('b h i d, b h j d -> b h i j',
    q, k)``); nothing for any other product."""
    args, _ = thaw_args(record.frozen)
    parsed = parse_einsum(args[0], [len(a), len(b)]) if args and isinstance(args[0], str) else None
    if parsed is None or len(parsed["inputs"]) != 2:
        return set()
    sizes = dict(zip(parsed["inputs"][0], a)) | dict(zip(parsed["inputs"][1], b))
    return {sizes[c] for c in einsum_contracted(parsed) if c in sizes}


def _from_projection(made: Mapping[int, OpRecord], node: int) -> bool:
    """Was ``node`` made by a projection, or cut from one along its features (``split``, a slice)?"""
    record = made.get(node)
    while record is not None and record.spec.family in _PIECES and len(record.ins) == 1:
        record = made.get(record.ins[0])
    return record is not None and record.spec.family is Family.PROJECTION


def _heads_split(shape: tuple[int, ...], out: tuple[int, ...], counts: set[int]) -> tuple[int, int] | None:
    """``(head count, width)`` where ``out`` splits the last axis of ``shape`` into two, the outer one a
    declared head count; else None."""
    if len(out) != len(shape) + 1 or not shape or out[:-2] != shape[:-1] or out[-2] * out[-1] != shape[-1]:
        return None
    return (out[-2], out[-1]) if out[-2] in counts and out[-1] > 1 else None
