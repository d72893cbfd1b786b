"""The two other shapes of the forward pass ``run`` traces: decoding with a key/value cache
(``--decode N``) and attention over the patches of an image (``--image SIZE --patch P``).

Each builds its model on the reference's seeded weights, traces it, and returns the same
:class:`~shapetrace.app.session.VariantRun` as the other variants, with notes worked out from the
recorded events. A decode run also records where each step begins (``run.header["steps"]``), so the
table can show the prefill, the first step in full, and the later steps folded.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from shapetrace.engine.formatting import fmt_bytes, fmt_shape
from shapetrace.engine.ops import Family, is_convolution

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.app.session import VariantRun
    from shapetrace.attention.config import AttentionConfig
    from shapetrace.engine.tracer import Trace


def trace_shape(config: AttentionConfig, device: str, notes: list[str], compare: bool,
                make_run: type[VariantRun], backward: bool = False) -> VariantRun:
    """Trace a ``--decode`` or ``--image`` run on ``device`` (``cpu`` or ``meta``); ``make_run`` is
    :class:`~shapetrace.app.session.VariantRun` (passed in: the session imports this module); ``backward``
    (an image only: a decode runs without gradients): its backward too."""
    header = run_header(config, device)
    trace, forward, model, plain, kept = _trace_decode(config, device, header) if config.decode else \
        _trace_image(config, device, header, backward)
    run = make_run(trace, config, device, notes, header=header)
    _fill_values(run, kept)
    if config.broken and compare and device != "meta":
        run.comparison = _compare(forward, model, plain)
    run.notes += _shape_notes(run)
    return run


# ---------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------

def decode_models(config: AttentionConfig, device: str):
    """``(model, reference, x)``: the cached attention as configured (broken or not), the plain
    cached attention on the same weights, and the prompt ``x`` (B, T, D)."""
    import torch

    from shapetrace.attention import variants
    from shapetrace.attention.broken_shapes import DECODE_BROKEN
    from shapetrace.attention.decode import DECODE_CLASSES

    ref, inputs = variants.build_reference(config, device)
    kind = DECODE_BROKEN[config.broken] if config.broken else DECODE_CLASSES[config.impl]
    with torch.device(device):
        model = kind(config.d_model, config.heads, **variants.model_options(config))
        plain = DECODE_CLASSES["manual"](config.d_model, config.heads, **variants.model_options(config))
    for m in (model, plain):
        m.load_state_dict(ref.state_dict())
    return model.eval(), plain.eval(), inputs["x"]


def decode(model, x, steps: int, trace: Trace | None = None, starts: list[int] | None = None):
    """The prefill over ``x``, then ``steps`` one-token steps; the op index where each step begins
    goes to ``starts`` (read from ``trace`` while it records)."""
    y, cache = model(x)                                     # the prefill fills the cache
    x = model.last_token(y)                                 # the next token's input
    for _ in range(steps):
        if trace is not None and starts is not None:
            starts.append(len(trace))
        x, cache = model(x, cache)
    return x, cache


def _trace_decode(config: AttentionConfig, device: str, header: dict[str, Any]) -> tuple:
    """``(trace, forward, model, plain, kept)``: the traced run, how to run a model untraced on the
    same input, the model as configured, the plain one on the same weights, and the scores and weights
    of the model's last attention call (:mod:`shapetrace.app.attention_values`). The op where each
    step begins goes to ``header["steps"]``."""
    import torch

    from shapetrace.app.attention_values import watching_attention

    model, plain, x = decode_models(config, device)
    trace = _new_trace(config)
    starts: list[int] = []
    with watching_attention(model) as kept:
        try:
            with torch.no_grad(), trace:
                trace.set_names(x, ["B", "T", "D"])
                trace.result = decode(model, x, config.decode, trace, starts)[0]
        except Exception:  # kept in trace.exception; the table shows the op that raised
            pass
    header["steps"] = starts
    return trace, lambda m: decode(m, x, config.decode)[0], model, plain, kept


# ---------------------------------------------------------------------------
# images
# ---------------------------------------------------------------------------

def image_models(config: AttentionConfig, device: str):
    """``(model, reference, pixels)``: patch embedding and attention as configured (broken or not),
    the plain ones on the same weights, and a seeded image batch (B, C, SIZE, SIZE)."""
    import torch

    from shapetrace.attention import variants
    from shapetrace.attention.broken_shapes import IMAGE_BROKEN
    from shapetrace.attention.vision import ATTENTION_CLASSES, ImageAttention, PatchEmbedding

    torch.manual_seed(config.seed)
    make = torch.empty if device == "meta" else torch.randn  # meta randn would load sympy (no values anyway)
    C, D, P = config.in_channels, config.d_model, config.patch
    with torch.device(device):
        attn = ATTENTION_CLASSES[config.impl](D, config.heads, **variants.model_options(config))
        embed = PatchEmbedding(C, D, P)
        pixels = make(config.batch, C, config.image, config.image)
        broken = IMAGE_BROKEN[config.broken](C, D, P) if config.broken else embed
    broken.load_state_dict(embed.state_dict())
    model = ImageAttention(broken, attn).train(config.train)
    return model, ImageAttention(embed, attn).train(config.train), pixels   # one attention, one mode


def _trace_image(config: AttentionConfig, device: str, header: dict[str, Any], backward: bool = False) -> tuple:
    """As :func:`_trace_decode`, for an image run (it has no steps: ``header`` stays as it is); ``backward``:
    the backward of the output's sum too (the patch embedding's conv weight gets its gradient)."""
    from shapetrace.app.attention_values import watching_attention
    from shapetrace.app.backward import grad_mode, new_trace

    model, plain, pixels = image_models(config, device)
    trace = new_trace(config.dims, backward)
    with watching_attention(model) as kept:
        try:
            with grad_mode(backward), trace:
                trace.set_names(pixels, ["B", None, None, None])   # C, SIZE, SIZE: no names of their own
                trace.result = model(pixels)
        except Exception:  # kept in trace.exception; the table shows the op that raised
            pass
    return trace, lambda m: m(pixels), model, plain, kept


# ---------------------------------------------------------------------------
# shared
# ---------------------------------------------------------------------------

def _new_trace(config: AttentionConfig) -> Trace:
    from shapetrace.engine.tracer import Trace

    return Trace(config.dims)


def run_header(config: AttentionConfig, device: str) -> dict[str, Any]:
    """What a variant's table shows above itself: the sizes worked out, and the device when it is meta."""
    from shapetrace.attention.notes import header

    return {"lines": header(config) + (["device: meta (shapes and strides only, no values: see the note "
                                        "below)"] if device == "meta" else [])}


#: why a meta-device run says nothing of NaN rows (it has no values)
NO_VALUES_NOTE = "NaN-row check skipped: the meta device has no values"


def _fill_values(run: VariantRun, kept: dict) -> None:
    """NaN rows from the real values (none on the meta device); the heat map of an image run."""
    from shapetrace.engine import findings

    trace = run.trace
    if run.device == "meta":
        trace.read_values(None, NO_VALUES_NOTE)
        return
    trace.read_values(findings.nan_rows(kept, trace.result if trace.exception is None else None))
    if run.config.image and trace.exception is None:
        run.heat = findings.heat_map(kept, None)


def _compare(forward, broken, plain) -> dict[str, Any]:
    """The broken model's final output against the plain model's (same weights, same input, eval mode)."""
    import torch

    modes = (broken.training, plain.training)
    broken.eval(), plain.eval()
    try:
        with torch.no_grad():
            want = forward(plain)
            try:
                got = forward(broken)
            except Exception as exc:  # the break raises (a cat whose parts do not line up)
                return {"raised": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    finally:
        broken.train(modes[0]), plain.train(modes[1])
    result: dict[str, Any] = {"raised": None, "shape": tuple(got.shape), "ref_shape": tuple(want.shape),
                              "leaks": None, "leak_note": "no leak test for decode and image runs"}
    if got.shape == want.shape:
        diff = (got - want).abs()
        finite = diff[torch.isfinite(diff)]
        result["max_diff"] = float(finite.max()) if finite.numel() else math.nan
        result["nan_rows"] = int(torch.isnan(got).all(-1).sum())
    return result


def _shape_notes(run: VariantRun) -> list[str]:
    note = _decode_note(run) if run.config.decode else _image_note(run)
    return [note] if note else []


def _decode_note(run: VariantRun) -> str | None:
    """How the cache grew, from the recorded joins."""
    c, events = run.config, run.trace.events
    joins = [e for e in events if e.spec.family is Family.JOIN and e.output is not None and not e.error]
    if not joins:
        return None
    last = joins[-1].output
    shapes = " -> ".join(dict.fromkeys(fmt_shape(e.output) for e in joins))
    total = 2 * last.nbytes
    return (f"KV cache: a prefill of T = {c.seq_len} tokens, then {c.decode} one-token step"
            f"{'s' if c.decode != 1 else ''}; each step's query is one token and its keys and values join the "
            f"cache along the tokens: {shapes}. Keys and values together now hold {fmt_bytes(total)}"
            + (f", H_kv = {c.h_kv} heads wide instead of H = {c.heads}" if c.grouped else "") + ".")


def _image_note(run: VariantRun) -> str | None:
    c = run.config
    conv = next((e for e in run.trace.events if is_convolution(e.spec) and e.output is not None), None)
    if conv is None:
        return None
    g, C, P, D = c.grid, c.in_channels, c.patch, c.d_model
    return (f"patches: {conv.op} #{conv.index} (kernel {P}, stride {P}) turns [{c.batch}, {C}, {c.image}, {c.image}] "
            f"into {fmt_shape(conv.output)}: a grid of {c.image} / {P} = {g} patches each way, N = {g}·{g} = "
            f"{g * g}, each projected from C·P·P = {C}·{P}·{P} = {C * P * P} values to D = {D} features "
            f"({C * P * P * D + D:,} parameters); with the class token in front, 1+N = {1 + g * g} tokens.")
