"""Every implementation on the same weights and input: counts, agreement, op-by-op difference.

Engine code (plain data, no Rich). Each implementation is traced the same way as
``shapetrace run --impl NAME``; its output is compared with the reference's.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shapetrace.app.devices import budget_or_default, pick_device
from shapetrace.app.threads import threads_for
from shapetrace.attention.config import IMPLS, AttentionConfig
from shapetrace.attention.memory import variant_bytes
from shapetrace.errors import UsageError

#: Largest |difference| from the reference counted as agreement (float32 rounding).
TOLERANCE = 1e-4


@dataclass
class ImplRow:
    """One implementation's trace summary and its distance from the reference output."""

    impl: str
    ops: int = 0
    views: int = 0
    copies: int = 0
    copy_bytes: int = 0
    alloc_bytes: int = 0
    max_diff: float | None = None
    errors: int = 0
    skipped: str | None = None
    trace: Any = field(default=None, repr=False)
    hidden_copies: int = 0  #: of ``copies``, the ones torch makes itself inside a batched matmul
    hidden_bytes: int = 0
    #: with ``--backward``: what autograd kept for the backward of the output's sum (not parameters), its
    #: attention weights' share, and how far the gradient of the input is from the reference's
    kept_bytes: int | None = None
    weights_bytes: int | None = None
    dx_diff: float | None = None

    @property
    def agrees(self) -> bool | None:
        if self.skipped or self.max_diff is None:
            return None
        return self.max_diff <= TOLERANCE

    def to_dict(self) -> dict[str, Any]:
        return {"impl": self.impl, "ops": self.ops, "views": self.views, "copies": self.copies,
                "copy_bytes": self.copy_bytes, "alloc_bytes": self.alloc_bytes, "max_diff": self.max_diff,
                "agrees": self.agrees, "errors": self.errors, "skipped": self.skipped,
                "hidden_copies": self.hidden_copies, "hidden_bytes": self.hidden_bytes,
                **({} if self.kept_bytes is None else {"backward": {
                    "kept_bytes": self.kept_bytes, "weights_bytes": self.weights_bytes, "dx_diff": self.dx_diff,
                    "dx_agrees": None if self.dx_diff is None else self.dx_diff <= TOLERANCE}})}


def compare_impls(config: AttentionConfig, impls: Sequence[str] = IMPLS,
                  max_bytes: int | None = None, device: str = "auto",
                  backward: bool = False) -> tuple[list[ImplRow], str]:
    """Trace each implementation on the reference's weights; returns the rows and the device. ``backward``:
    each one's backward of the output's sum too (what autograd keeps, the input's gradient)."""
    with threads_for(variant_bytes(config)):
        return _compare_impls(config, impls, max_bytes, device, backward)


def _compare_impls(config: AttentionConfig, impls: Sequence[str], max_bytes: int | None,
                   requested: str = "auto", backward: bool = False) -> tuple[list[ImplRow], str]:
    import torch

    from shapetrace.attention import variants
    from shapetrace.engine.summary import stats

    config = replace(config, train=False, dropout=0.0, broken=None, impl="manual")
    device, _note = pick_device(requested, variant_bytes(config), budget_or_default(max_bytes))
    ref, inputs = variants.build_reference(config, device)
    if backward and device == "meta":
        raise UsageError("--backward needs values, and this comparison would run on the meta device: use a "
                         "smaller size or --device cpu")
    with torch.no_grad():
        want = ref(inputs["x"], inputs["memory"], inputs["pad"])
    want_dx = _input_grad(ref, inputs) if backward else None
    rows = []
    for impl in impls:
        try:
            cfg = replace(config, impl=impl)
        except UsageError:
            rows.append(ImplRow(impl, skipped=skip_reason(impl, config)))
            continue
        trace, out, dx = _trace_impl(cfg, ref, inputs, device, backward)
        s = stats(trace.events)
        hidden = [c.nbytes for e in trace.events if not e.error for c in e.hidden_copies]
        row = ImplRow(impl, s["ops"], s["views"], s["copies"] + len(hidden), s["copy_bytes"] + sum(hidden),
                      s["alloc_bytes"], trace=trace, hidden_copies=len(hidden), hidden_bytes=sum(hidden))
        row.errors = sum(1 for d in trace.diagnostics if d.severity == "error")
        if out is not None and device != "meta":
            row.max_diff = float((out - want).abs().max())
        if backward:
            kept = trace.backward
            row.kept_bytes, row.weights_bytes = kept.activation_bytes, kept.weights_bytes
            row.dx_diff = None if dx is None else float((dx - want_dx).abs().max())
        rows.append(row)
    return rows, device


def skip_reason(impl: str, config: AttentionConfig) -> str:
    """Why ``impl`` cannot run this configuration, in a few words."""
    if impl == "fused-qkv":
        return "one input, one D×3D linear: no " + ("--kv-len" if config.cross else "--kv-heads")
    if impl == "torch":
        return "nn.MultiheadAttention has no --kv-heads"
    return "not available for these options"


def _trace_impl(cfg: AttentionConfig, ref, inputs, device: str, backward: bool = False):
    """``(trace, output, the input's gradient or None)``: one implementation traced (and its backward of the
    output's sum, on a copy of the input that requires grad)."""
    from shapetrace.app.backward import grad_mode, new_trace
    from shapetrace.attention import variants

    model = variants.build_impl(cfg, cfg.impl, ref, device)
    trace = new_trace(cfg.dims, backward)
    x = inputs["x"].detach().clone().requires_grad_(True) if backward else inputs["x"]
    with grad_mode(backward), trace:
        trace.set_names(x, ["B", cfg.q_name, "D"])
        if inputs["memory"] is not None:
            trace.set_names(inputs["memory"], ["B", cfg.k_name, "D"])
        out = model(x, inputs["memory"], inputs["pad"])
        if backward:
            trace.loss = out   # (its sum: not the last result, which may be the weights nn.MultiheadAttention returns)
    return trace, None if out is None else out.detach(), x.grad if backward else None


def _input_grad(ref, inputs):
    """The gradient of the reference's output sum with respect to its input, untraced."""
    import torch

    x = inputs["x"].detach().clone().requires_grad_(True)
    with torch.enable_grad():
        ref(x, inputs["memory"], inputs["pad"]).sum().backward()
    return x.grad


def event_key(e) -> tuple:
    """What makes two ops 'the same' across implementations: op name and output names and shape."""
    o = e.output
    return (e.op, tuple(o.dims) if o else (), tuple(o.shape) if o else ())


def diff_events(a: Sequence, b: Sequence) -> list[tuple[str, Any, Any]]:
    """Op-by-op difference: ``("same"|"changed"|"only-a"|"only-b", event_a, event_b)`` rows."""
    ka, kb = [event_key(e) for e in a], [event_key(e) for e in b]
    rows: list[tuple[str, Any, Any]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ka, b=kb, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [("same", a[i], b[j]) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        left, right = list(a[i1:i2]), list(b[j1:j2])
        while left and right and tag == "replace":
            rows.append(("changed", left.pop(0), right.pop(0)))
        rows += [("only-a", e, None) for e in left] + [("only-b", None, e) for e in right]
    return rows


def parse_impls(text: str) -> list[str]:
    """``--impls manual,sdpa``: known names, each once, at least one (an empty list ran nothing and
    printed an empty table with exit 0)."""
    names = check_impls([s.strip() for s in text.split(",") if s.strip()])
    if not names:
        raise UsageError(f"--impls {text!r} names no implementation: give some separated by commas, "
                         f"e.g. --impls manual,sdpa (choose from: {', '.join(IMPLS)})")
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise UsageError(f"--impls names {twice} twice: give each implementation once")
    return names


def check_impls(names: Sequence[str]) -> list[str]:
    for n in names:
        if n not in IMPLS:
            raise UsageError(f"unknown implementation {n!r}; choose from: {', '.join(IMPLS)}")
    return list(names)


__all__ = ["ImplRow", "compare_impls", "diff_events", "event_key", "check_impls", "parse_impls", "TOLERANCE"]
