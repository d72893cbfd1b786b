"""Facts that need values, not just shapes: NaN rows, one head's heat map, and what a broken
variant changes compared with the reference (max difference, tokens that leaked).

Engine code: returns plain Python data (lists, tuples, dicts), never Rich.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

HEAT_MAX = 16          # rows and columns shown in a heat map
LEAK_MAX_TOKENS = 128  # B * T above this: the leak test (one perturbed copy per token) is skipped
#: A change counts when it exceeds this times (1 + the largest output): far above the rounding of a
#: batched pass, far below any real dependency (float64 probes keep even tiny ones well apart).
CHANGE_TOLERANCE = {torch.float64: 1e-9}
FLOAT32_TOLERANCE = 1e-4


def nan_rows(kept: dict, output: torch.Tensor | None) -> list[tuple[int, int | None, int]]:
    """(batch, head, query) of every all-NaN row of the weights (head None: rows of the output)."""
    weights = kept.get("weights")
    if weights is not None and weights.dim() == 4:
        dead = torch.isnan(weights).all(dim=-1)                 # (B, H, T_q)
        return [tuple(i) for i in dead.nonzero().tolist()]
    if output is not None and output.dim() == 3:
        dead = torch.isnan(output).all(dim=-1)                  # (B, T_q)
        return [(b, None, q) for b, q in dead.nonzero().tolist()]
    return []


def nan_rows_of(outputs: list[tuple[int, torch.Tensor]]) -> tuple[list, int | None] | None:
    """The NaN rows of the first traced attention output (softmax, SDPA) that has any, and its index
    in ``outputs``' numbering: ``(rows, index)``; ``([], None)`` when none has; None when none could be
    checked. One sum per output screens them all with a single read (a NaN anywhere makes its sum NaN); only a flagged
    output is searched row by row. Run once after the trace (never per op: no GPU sync while it records)."""
    checked = [(i, out) for i, out in outputs if out.dim() >= 3 and out.is_floating_point()]
    for index, out in _screened(checked):
        rows = _rows_all_nan(out)
        if rows:
            return rows, index
    return ([], None) if checked else None


def _screened(outputs: list[tuple[int, torch.Tensor]]) -> list[tuple[int, torch.Tensor]]:
    """The outputs whose sum is NaN (all of them if their sums cannot be stacked in one tensor)."""
    if not outputs:
        return []
    with torch.no_grad():
        try:
            sums = torch.stack([out.sum(dtype=torch.float32) for _, out in outputs])
        except RuntimeError:   # outputs on different devices
            return outputs
        flagged = torch.isnan(sums).tolist()
    return [pair for pair, nan in zip(outputs, flagged) if nan]


def _rows_all_nan(out: torch.Tensor) -> list[tuple[int, int | None, int]]:
    """(batch, head, query) of each row that is NaN all along the last axis (head None for 3-d)."""
    with torch.no_grad():
        dead = torch.isnan(out).all(dim=-1)
        rows = dead.reshape(dead.shape[0], -1, dead.shape[-1]).nonzero().tolist()
    if out.dim() == 3:
        return [(b, None, q) for b, _h, q in rows]
    return [(b, h, q) for b, h, q in rows]


def heat_map(kept: dict, pad: tuple[int, ...] | None, head: int = 0) -> dict[str, Any] | None:
    """One head's masked scores and weights as 2-D lists (cropped to HEAT_MAX), for the sequence
    with the most padding (the first one otherwise)."""
    weights = kept.get("weights")
    if weights is None or weights.dim() != 4 or weights.device.type == "meta":
        return None
    b = max(range(len(pad)), key=lambda i: pad[i]) if pad else 0
    scores = kept.get("scores")
    n_q, n_k = weights.shape[-2], weights.shape[-1]
    crop = (min(n_q, HEAT_MAX), min(n_k, HEAT_MAX))
    return {
        "batch": b, "head": head, "shape": (n_q, n_k), "crop": crop,
        "scores": _grid(scores[b, head], crop) if scores is not None else None,
        "weights": _grid(weights[b, head], crop),
    }


def _grid(t: torch.Tensor, crop: tuple[int, int]) -> list[list[float]]:
    return t[: crop[0], : crop[1]].detach().float().tolist()


def changes(model, inputs: dict, bumps: torch.Tensor) -> torch.Tensor:
    """changed[n, b2, t2]: does output token (b2, t2) change when ``bumps[n]`` (shaped like the
    input) is added to the input?

    One batched pass: every perturbed copy runs at once under ``torch.func.vmap``, which keeps the
    copies apart (a model that mixes its batch axis still sees only its own batch). Falls back to one
    forward pass per copy when the model cannot run under vmap.
    """
    x = inputs["x"]
    memory, pad = inputs.get("memory"), inputs.get("pad")
    with torch.no_grad():
        base = model(x, memory, pad)
        try:
            outs = torch.func.vmap(lambda xi: model(xi, memory, pad))(x + bumps)   # (N, B, T_q, D)
        except Exception:  # an op without a batching rule: one pass per copy
            outs = torch.stack([model(x + bump, memory, pad) for bump in bumps])
    tolerance = CHANGE_TOLERANCE.get(x.dtype, FLOAT32_TOLERANCE)
    changed = (outs - base).abs().nan_to_num(0.0).amax(dim=-1) > tolerance * (1 + base.abs().nan_to_num(0.0).amax())
    return changed | (torch.isnan(outs).any(-1) & ~torch.isnan(base).any(-1))


def token_bumps(x: torch.Tensor, tokens: list[tuple[int, int]]) -> torch.Tensor:
    """One copy per (batch, token): +1 on every feature of that token only."""
    bumps = torch.zeros(len(tokens), *x.shape[:2], 1, dtype=x.dtype, device=x.device)
    for n, (b, t) in enumerate(tokens):
        bumps[n, b, t] = 1.0
    return bumps


def dependencies(model, inputs: dict) -> torch.Tensor:
    """deps[b, t, b2, t2]: does output token (b2, t2) change when input token (b, t) changes?"""
    x = inputs["x"]
    B, T, _ = x.shape
    deps = changes(model, inputs, token_bumps(x, [(b, t) for b in range(B) for t in range(T)]))
    return deps.reshape(B, T, *deps.shape[1:])


def cross_sequence_dependencies(model, inputs: dict) -> torch.Tensor:
    """deps[b, t, b2, t2] for sources in another sequence than the receiver (False within one).

    Group testing first: one copy per sequence, all of its tokens perturbed at once (B copies). Only
    a sequence that reaches another one is then tested token by token, so a model that keeps its
    sequences apart (every correct one, and most bugs) costs B copies instead of B·T.
    """
    x = inputs["x"]
    B, T, _ = x.shape
    whole = torch.zeros(B, B, T, 1, dtype=x.dtype, device=x.device)
    for b in range(B):
        whole[b, b] = 1.0
    other = ~torch.eye(B, dtype=torch.bool, device=x.device)[:, :, None]      # source seq != receiver seq
    per_sequence = changes(model, inputs, whole)                               # (B, B, T_q)
    reaching = [b for b in range(B) if bool((per_sequence[b] & other[b]).any())]
    deps = torch.zeros(B, T, B, T, dtype=torch.bool, device=x.device)
    if reaching:
        tokens = [(b, t) for b in reaching for t in range(T)]
        found = changes(model, inputs, token_bumps(x, tokens))
        for (b, t), row in zip(tokens, found):
            deps[b, t] = row
    return deps & other[:, None, :, :].expand(B, T, B, T) if B else deps


def compare_outputs(broken, ref, inputs: dict, probe: Callable[[], tuple] | None = None) -> dict[str, Any]:
    """Max |difference| of the broken output from the reference, NaN rows, and leaked tokens.

    ``probe``: builds ``(broken, ref, inputs)`` at a smaller width with the same token-to-token
    dependencies (see :func:`shapetrace.attention.catalogue.leak_config`), where the leak test runs
    instead (it perturbs one copy per token, so its cost grows with the width squared); called only
    when the leak test runs.
    """
    x = inputs["x"]
    B, T, _ = x.shape
    modes = (broken.training, ref.training)
    broken.eval(), ref.eval()
    try:
        with torch.no_grad():
            want = ref(x, inputs.get("memory"), inputs.get("pad"))
            try:
                got = broken(x, inputs.get("memory"), inputs.get("pad"))
            except Exception as exc:  # the break may raise (view-after-transpose)
                return {"raised": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        result: dict[str, Any] = {"raised": None, "shape": tuple(got.shape), "ref_shape": tuple(want.shape)}
        if got.shape != want.shape:
            return result
        diff = (got - want).abs()
        finite = diff[torch.isfinite(diff)]
        result["max_diff"] = float(finite.max()) if finite.numel() else math.nan
        result["nan_rows"] = int(torch.isnan(got).all(-1).sum())
        result["leaks"] = _probed_leaks(broken, ref, inputs, probe) if B * T <= LEAK_MAX_TOKENS else None
        return result
    finally:
        broken.train(modes[0]), ref.train(modes[1])


def reference_dependencies(ref, inputs: dict) -> torch.Tensor | None:
    """The reference's dependencies without running it, where they are known: in self-attention
    every token reaches every output of its own sequence (with a causal mask: every output at its
    position or later) and nothing else. None (compute them) with padding or a second sequence."""
    causal = getattr(ref, "causal", None)
    if inputs.get("memory") is not None or inputs.get("pad") is not None or causal is None:
        return None
    x = inputs["x"]
    B, T, _ = x.shape
    same = torch.eye(B, dtype=torch.bool, device=x.device)[:, None, :, None].expand(B, T, B, T)
    if causal:  # source t reaches receiver t2 when t <= t2
        same = same & torch.ones(T, T, dtype=torch.bool, device=x.device).triu()[None, :, None, :]
    return same


def _probed_leaks(broken, ref, inputs, probe) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The leaks measured on ``probe()`` when it runs, on the models themselves otherwise."""
    if probe is not None:
        try:
            return _leaks(*probe())
        except Exception:  # the probe cannot run (it should): measure at full size
            pass
    return _leaks(broken, ref, inputs)


def _leaks(broken, ref, inputs) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(source token, receiving token) pairs the broken model connects and the reference does not.

    Where the reference's dependencies are known (unmasked self-attention: everything within a
    sequence), only cross-sequence pairs can leak, and those are found by group testing.
    """
    known = reference_dependencies(ref, inputs)
    if known is not None and not ref.causal:
        extra = cross_sequence_dependencies(broken, inputs)
    else:
        extra = dependencies(broken, inputs) & ~(known if known is not None else dependencies(ref, inputs))
    return [((b, t), (b2, t2)) for b, t, b2, t2 in extra.nonzero().tolist()]


def leak_summary(leaks, limit: int = 6) -> dict[str, Any]:
    """Counts of leaked (source -> receiver) token pairs: across sequences, from later tokens,
    and a few examples as ``"b1 t4 -> b1 t0"``."""
    cross = [p for p in leaks if p[0][0] != p[1][0]]
    future = [p for p in leaks if p[0][0] == p[1][0] and p[0][1] > p[1][1]]
    examples = [f"b{s[0]} t{s[1]} -> b{d[0]} t{d[1]}" for s, d in (cross + future + list(leaks))[:limit]]
    return {"total": len(leaks), "cross_sequence": len(cross), "from_later": len(future),
            "examples": list(dict.fromkeys(examples))}
