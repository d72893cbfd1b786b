"""The large-input memory probe: "allocates nothing beyond the output", measured by the kernel.

A byte count taken inside the child can be forged by the learner's code, which runs in that process.
So an exercise with ``[checks] max_alloc_bytes`` is decided differently: before the learner's file is
read, the child's trusted code builds one large input and caps its own address space for good
(``RLIMIT_AS``, a hard limit it cannot raise: no capabilities) at what it holds now, plus what the
exercise allows for that input, plus :data:`SLACK_BYTES`. The input is large enough that one extra
copy of it, or of the output, does not fit in the slack. The learner's function then runs on it; the
output's bytes come back raw, and the parent, which computed the expected output itself, compares
them. A copying answer runs out of memory; nothing the learner's code changes in its process makes
the kernel grant more, and a forged "it fitted" has to deliver the right bytes, computed inside the
cap. The in-child allocation count stays only as explanation text.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import os
from dataclasses import dataclass

from shapetrace.errors import UsageError

#: Room above the allowed bytes for the interpreter's own noise (measured: under 1 MiB for a call).
SLACK_BYTES = 8 << 20
#: The probe's sizes per input builder: the input is 16 MiB of float32, twice the slack.
SIZES = {
    "kv_heads": dict(B=1, T=1024, H=4, d_k=2048, T_k=2, H_kv=2, n_rep=2),  # H = H_kv * n_rep
    "tokens": dict(B=1, T=1024, H=8, d_k=512, T_k=2, H_kv=2, n_rep=2),
}
#: The axes of the first input each builder makes (its size is ``in_bytes``).
INPUT_AXES = {"kv_heads": ("B", "H_kv", "T", "d_k"), "tokens": ("B", "T", "D")}
#: Bytes per element: the builders make float32 inputs, and these exercises move them.
ITEM_BYTES = 4
CASE = "large"
#: Dtypes a probe's output may come back as (named as ``str(dtype)`` without ``torch.``).
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def probe_inputs(kind: str, seed: int):
    """The probe's input for the builder ``kind`` (None when it has no probe); same seed, same tensors."""
    import torch

    from shapetrace.exercises import inputs as inp

    sizes = SIZES.get(kind)
    if sizes is None:
        return None
    g = torch.Generator().manual_seed(seed & 0x7FFFFFFF)
    args, names, dims = inp.BUILDERS[kind](dict(sizes), None)  # values in order: each says where it is
    offset = int(torch.randint(0, 1000, (1,), generator=g))
    args = [a.add_(offset) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    shown = {k: sizes[k] for k in inp.SHOWN.get(kind, ("B", "T", "H", "d_k"))}
    return inp.Inputs(CASE, args, names, dims, shown)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv}


def budget(expr: str, names: dict[str, int]) -> int:
    """Evaluate a byte budget such as ``"out_bytes"`` or ``"2 * out_bytes"`` (no Python eval)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"cannot evaluate {expr!r}")
    return int(ev(ast.parse(str(expr), mode="eval")))


def plan(exercise) -> dict | None:
    """What the child needs, from the exercise alone (no torch, so the child starts at once): the
    output's shape and dtype, the bytes allowed and the slack. None for an exercise without a probe.
    :func:`prepare` checks it against the reference's real output."""
    expr, sizes = exercise.checks.get("max_alloc_bytes"), SIZES.get(exercise.inputs)
    if not expr or sizes is None or not exercise.output_names:
        return None
    axes = dict(sizes, D=sizes["H"] * sizes["d_k"])
    shape = [axes[n] for n in exercise.output_names.split()]
    names = dict(out_bytes=math.prod(shape) * ITEM_BYTES,
                 in_bytes=math.prod(axes[n] for n in INPUT_AXES[exercise.inputs]) * ITEM_BYTES)
    return {"allow_bytes": budget(expr, names), "slack_bytes": SLACK_BYTES, "shape": shape, "dtype": "float32",
            "expr": str(expr), **names}


@dataclass
class Probe:
    """The parent's side: the input, the expected output, and the bytes the exercise allows for it."""

    inputs: object
    expected: object
    plan: dict

    allow = property(lambda self: int(self.plan["allow_bytes"]))
    expr = property(lambda self: str(self.plan["expr"]))
    in_bytes = property(lambda self: int(self.plan["in_bytes"]))
    out_bytes = property(lambda self: int(self.plan["out_bytes"]))


def prepare(exercise, reference, seed: int) -> Probe | None:
    """The probe of an exercise with ``max_alloc_bytes`` (None otherwise); runs the reference here.

    Raises :class:`~shapetrace.errors.UsageError` when the reference's output is not what :func:`plan`
    told the child (a content bug, never the learner's).
    """
    import torch


    planned = plan(exercise)
    if planned is None:
        return None
    inputs = probe_inputs(exercise.inputs, seed)
    with torch.no_grad():
        expected = reference(*inputs.fresh())
    if list(expected.shape) != planned["shape"] or expected.dtype != torch.float32:
        raise UsageError(f"exercise {exercise.id}: its reference returns {expected.dtype} "
                           f"{list(expected.shape)} on the memory probe, not the planned float32 "
                           f"{planned['shape']} (output_names and probe.SIZES disagree)")
    return Probe(inputs, expected, planned)


def received(header: dict, body: bytes):
    """The output tensor the child streamed back (raw bytes), or None when they do not add up."""
    import torch

    shape, dtype = header.get("shape"), header.get("dtype")
    if not header.get("raw"):
        return None
    if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape) and dtype in DTYPES):
        return None
    dt = getattr(torch, dtype)
    if len(body) != math.prod(shape) * torch.empty(0, dtype=dt).element_size():
        return None
    if not body:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(bytearray(body), dtype=dt).reshape(shape)


# -- the child's side (bound before the learner's file is read) ------------------------------------------


def sender(fd: int):
    """Functions ``send(case, out, expected)`` and ``fail(case, facts)`` that write the probe's frame.

    ``send`` writes ``out`` to the channel raw, from its own memory; a row that is not contiguous is
    copied one row at a time (a few KiB), so sending never needs a copy of the output. An output of
    another shape or dtype than ``expected`` goes back as its header alone. ``fail`` sends the facts
    of an exception. Everything they use is bound now, before the learner's code can patch modules.
    """

    import torch

    from shapetrace.exercises.frames import encode, head
    from shapetrace.exercises.plain import pack

    write, product, mview, uint8 = os.write, itertools.product, memoryview, torch.uint8

    def out_all(data) -> None:
        view = mview(data).cast("B")
        while view:
            view = view[write(fd, view):]

    def send(case: int, out, expected: dict) -> None:
        shape, dtype = list(out.shape), str(out.dtype).removeprefix("torch.")
        raw = shape == expected["shape"] and dtype == expected["dtype"] and out.dim() > 0
        nbytes = out.numel() * out.element_size() if raw else 0
        out_all(head({"kind": "probe", "case": case, "shape": shape, "dtype": dtype, "raw": raw}, nbytes))
        if raw and out.is_contiguous():
            out_all(out.reshape(-1).view(uint8).numpy())
        elif raw:
            for idx in product(*[range(n) for n in shape[:-1]]):
                out_all(out[idx].contiguous().view(uint8).numpy())

    def fail(case: int, facts: dict) -> None:
        out_all(encode({"kind": "probe", "case": case, "raw": False}, pack({}, facts)))

    return send, fail
