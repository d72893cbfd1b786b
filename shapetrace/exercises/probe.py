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

import math
from dataclasses import dataclass

#: Room above the allowed bytes for the interpreter's own noise (measured: under 1 MiB for a call).
SLACK_BYTES = 8 << 20
#: The probe's sizes per input builder: the input is 16 MiB of float32, twice the slack.
SIZES = {
    "kv_heads": dict(B=1, T=1024, H=2, d_k=2048, T_k=2, H_kv=2, n_rep=2),
    "tokens": dict(B=1, T=1024, H=8, d_k=512, T_k=2, H_kv=2, n_rep=2),
}
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
    args, names, dims = inp.BUILDERS[kind](dict(sizes), g)
    shown = {k: sizes[k] for k in inp.SHOWN.get(kind, ("B", "T", "H", "d_k"))}
    return inp.Inputs(CASE, args, names, dims, shown)


@dataclass
class Probe:
    """The parent's side: the input, the expected output, and the bytes the exercise allows for it."""

    inputs: object
    expected: object
    allow: int
    expr: str

    @property
    def in_bytes(self) -> int:
        first = next(a for a in self.inputs.args if hasattr(a, "element_size"))
        return first.numel() * first.element_size()

    @property
    def out_bytes(self) -> int:
        return self.expected.numel() * self.expected.element_size()

    def request(self) -> dict:
        """What the child needs: the cap (allowed + slack), and the output's shape and dtype to send."""
        return {"allow_bytes": self.allow, "slack_bytes": SLACK_BYTES, "shape": list(self.expected.shape),
                "dtype": str(self.expected.dtype).removeprefix("torch.")}


def prepare(exercise, reference, seed: int) -> Probe | None:
    """The probe of an exercise with ``max_alloc_bytes`` (None otherwise); runs the reference here."""
    import torch

    from shapetrace.exercises.judge import budget

    expr = exercise.checks.get("max_alloc_bytes")
    inputs = probe_inputs(exercise.inputs, seed) if expr else None
    if inputs is None:
        return None
    with torch.no_grad():
        expected = reference(*inputs.fresh())
    probe = Probe(inputs, expected, 0, str(expr))
    probe.allow = budget(expr, dict(out_bytes=probe.out_bytes, in_bytes=probe.in_bytes))
    return probe


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
    import itertools
    import os

    import torch

    from shapetrace.exercises.frames import encode, head

    write, product, mview, uint8, save, buffer = os.write, itertools.product, memoryview, torch.uint8, \
        torch.save, __import__("io").BytesIO

    def out_all(data) -> None:
        view = mview(data).cast("B")
        while view:
            view = view[write(fd, view):]

    def send(case: int, out, expected: dict) -> None:
        shape, dtype = list(out.shape), str(out.dtype).removeprefix("torch.")
        raw = shape == expected["shape"] and dtype == expected["dtype"] and out.dim() > 0
        nbytes = out.numel() * out.element_size() if raw else 0
        out_all(head({"kind": "probe", "case": case, "shape": shape, "dtype": dtype, "raw": raw}, nbytes))
        if raw:
            for idx in product(*[range(n) for n in shape[:-1]]):
                out_all(out[idx].contiguous().view(uint8).numpy())

    def fail(case: int, facts: str) -> None:
        buf = buffer()
        save({"facts": facts}, buf)
        out_all(encode({"kind": "probe", "case": case, "raw": False}, buf.getvalue()))

    return send, fail
