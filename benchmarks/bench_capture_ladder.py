"""What the facts issue 21 asks the capture for cost at the least, one step at a time (issues 21, 38).

    PYTHONPATH=. python benchmarks/bench_capture_ladder.py [--rounds 11] [--layers 12] [--decode-steps 200]

The same models as ``bench_engine.py`` (12 pre-norm attention blocks at D 32, T 8 and at D 256, T 64),
one process, one thread, every kind interleaved round by round. Each step adds one fact to the one
before it, in the cheapest pure-Python form found; none names, judges or words anything:

  bare          a bare TorchFunctionMode logger (op, output shape and stride, caller's file and line)
  floor         the capture floor: op, first call site outside torch, every operand's and result's
                layout and storage, the other arguments (``bench_engine.capture_floor``)
  +user stack   the call site as shapetrace needs it: every user frame (innermost first), not only
                the first, so that an event can say which function of the user's called it
  +identity     each tensor's identity (which earlier result a call reads), as ``id(tensor)``
                beside its storage and layout, linked after the run (shapetrace keeps a weak
                reference per tensor and links at call time, which costs more)
  +module path  the module running each call: a stack of module slots kept by a wrapper around
                ``nn.Module.__call__``, named after the run (shapetrace's wrapper also walks the
                user's frames above each module call; global module hooks cost more still): the
                least capture
  +exact identity  the least capture with each tensor's identity exact (issue 38): linked at the call
                to the node that made it, through a weak reference per tensor as shapetrace keeps
                (``id()`` alone is wrong once a freed tensor's id is taken by one the mode never saw)
  +frozen args  the same, with the call's arguments frozen as shapetrace freezes them (a tensor as its
                shape, dtype and ``requires_grad``; lists, tuples, slices, dicts as plain values)
and, in the same rounds, shapetrace itself:

  shapetrace recording  ``with shapetrace.trace(...)`` around the forward: capture only, nothing inferred
  shapetrace analysis   the same, then ``trace.report()``: every pass of ``engine/infer`` (``trace.events``),
                        the rules and the verdict, as ``shapetrace.trace`` gives them (no JSON, and no
                        dependency check: a plain trace does not ask for one)

and, timed apart on the last step's rows, the simplest pass a "capture, then infer" engine must make:
one plain dict per recorded call (op, operand and result shapes and strides, file:line), no name.

Printed: µs per call and the ratio to the bare logger's overhead; the traced forward over the
untraced one; then what issue 21's targets leave for naming, verdicts and words: recording ≤ 3×,
recording + every fact ≤ 5×, and at D 256 traced with every fact ≤ 1.3× untraced. Then issue 38's
ratios: shapetrace's recording over the least capture (``+module path``), both overheads over the same
round's untraced forward (target ≤ 1.25×), and the two exact rungs over the least capture and shapetrace's
recording over them; the analysis after the run in µs per event, the inference
(``trace.events``) apart from the rules and report (target for inference ≤ 12), each timed inside the
analysis row's own rounds; and the forward traced with every fact over the untraced one (target ≤ 1.5×
at D 256: the 12-layer D 256, T 64 model).

Last, a KV-cache decode loop (``--decode-steps``, 200 by default; 0 leaves it out): the reference's
cached attention as ``shapetrace run --decode`` runs it, untraced, recorded, and recorded with every fact,
the same number of interleaved rounds (target: traced <= 2x untraced).
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import time
import weakref

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_engine import bare_logger, build_model, capture_floor, run_sizes  # noqa: E402

STEPS = ("bare", "floor", "+user stack", "+identity", "+module path", "+exact identity", "+frozen args",
         "shapetrace recording", "shapetrace analysis")


def recorders():
    """The ladder's recorders (classes, made here: they need torch)."""
    import torch
    from torch.overrides import TorchFunctionMode

    from shapetrace.engine.call_args import _PLAIN as plain
    from shapetrace.engine.call_args import freeze
    from shapetrace.engine.sites import user_stack

    tensor, parameter, ref = torch.Tensor, torch.nn.Parameter, weakref.ref

    def layout(t):
        return t.shape, t.stride(), t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype

    def whole_stack():
        """The user's frames of the call site, innermost first (read from inside the mode, as the
        floor's first-frame reader is)."""
        return user_stack(sys._getframe(2))

    class Identity(TorchFunctionMode):
        """... and each tensor's identity, in its cheapest form: ``id(tensor)`` next to its storage and
        layout (linking a read to the result it reads is then decided after the run: the latest result
        with that id and that storage and layout; a weak reference per tensor, as shapetrace keeps,
        would decide it at call time and costs more). ``slots``: the module calls running now."""

        def __init__(self, slots: list | None = None):
            super().__init__()
            self.rows: list[tuple] = []
            self.slots = slots

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ins, others = [], []
            for a in args:
                if isinstance(a, tensor):
                    ins.append((id(a), *layout(a)))
                else:
                    others.append(a)
            result = (id(out), *layout(out)) if isinstance(out, tensor) else None
            slots = self.slots
            self.rows.append((func, tuple(ins), tuple(others), kwargs, result, user_stack(sys._getframe(1)),
                              slots[-1] if slots else -1))
            return out

    class ExactIdentity(TorchFunctionMode):
        """The least capture with exact identity, in the cheapest form found (shapetrace's own scheme,
        stripped to identity): each tensor's node, decided at the call. ``ids`` maps ``id(tensor)`` to a
        weak reference and the node; an entry counts only while its reference still gives this very
        tensor, so an id taken by a tensor made after the first one died (one the mode never saw) is a
        new node. A result is a new node; an operand never seen is entered as one. The row is the least
        capture's, with the node in place of ``id()``."""

        def __init__(self, slots: list | None = None):
            super().__init__()
            self.rows: list[tuple] = []
            self.slots = slots
            self.ids: dict[int, tuple] = {}
            self.count = itertools.count()

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ids, count = self.ids, self.count
            ins, others = [], []
            for a in args:
                if isinstance(a, tensor):
                    entry = ids.get(id(a))
                    if entry is None or entry[0]() is not a:
                        entry = ids[id(a)] = (ref(a), next(count))
                    ins.append((entry[1], *layout(a)))
                else:
                    others.append(a)
            if isinstance(out, tensor):
                node = next(count)
                ids[id(out)] = (ref(out), node)
                result = (node, *layout(out))
            else:
                result = None
            slots = self.slots
            self.rows.append((func, tuple(ins), tuple(others), kwargs, result, user_stack(sys._getframe(1)),
                              slots[-1] if slots else -1))
            return out

    class ExactFrozen(ExactIdentity):
        """... and the arguments frozen at the call, as shapetrace keeps them (``call_args``): every
        argument in order, a tensor as its shape, dtype, ``requires_grad`` and type (never kept alive), a
        plain value as itself, anything else through ``call_args.freeze``; the keyword arguments likewise."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ids, count = self.ids, self.count
            ins, frozen = [], []
            for a in args:
                kind = type(a)
                if kind is tensor or kind is parameter:
                    entry = ids.get(id(a))
                    if entry is None or entry[0]() is not a:
                        entry = ids[id(a)] = (ref(a), next(count))
                    shape, dtype = a.shape, a.dtype
                    ins.append((entry[1], shape, a.stride(), a.untyped_storage().data_ptr(), a.storage_offset(),
                                dtype))
                    frozen.append((shape, dtype, a.requires_grad, kind))
                elif kind in plain:
                    frozen.append(a)
                else:
                    frozen.append(freeze(a))
            if isinstance(out, tensor):
                node = next(count)
                ids[id(out)] = (ref(out), node)
                result = (node, *layout(out))
            else:
                result = None
            slots = self.slots
            self.rows.append((func, tuple(ins), tuple(frozen),
                              kwargs and tuple((k, v if type(v) in plain else freeze(v)) for k, v in kwargs.items()),
                              result, user_stack(sys._getframe(1)), slots[-1] if slots else -1))
            return out

    return (lambda: capture_floor(site=whole_stack)), Identity, ExactIdentity, ExactFrozen


class ModuleSlots:
    """The module path in its cheapest form: ``nn.Module.__call__`` wrapped to keep a stack of *slots*
    (the index of each module's first call, and the slot it first ran in); paths are named from them
    after the run. (A global module hook costs more: every module call then takes torch's slow path.)"""

    def __init__(self):
        self.running: list[int] = []
        self.seen: dict[int, int] = {}
        self.first: list[tuple] = []
        self.original = None

    def __enter__(self) -> ModuleSlots:
        from torch.nn import Module

        from shapetrace.engine.sites import module_wrapper

        running, seen, first, original = self.running, self.seen, self.first, Module.__call__

        def call(module, *args, **kwargs):
            slot = seen.get(id(module))
            if slot is None:
                slot = seen[id(module)] = len(first)
                first.append((module, running[-1] if running else -1))
            running.append(slot)
            try:
                return original(module, *args, **kwargs)
            finally:
                del running[-1]

        module_wrapper(call.__code__)   # plumbing, not a frame of the user's
        self.original, Module.__call__ = original, call
        return self

    def __exit__(self, *exc) -> None:
        from torch.nn import Module

        Module.__call__ = self.original


def plain_rows(rows) -> list[dict]:
    """The least an analysis makes of the rows: one plain dict per call, nothing named."""
    from shapetrace.engine.sites import line_at

    where: dict = {}
    made = []
    for func, ins, _others, _kwargs, out, (codes, offset), _module in rows:   # (operands, result: id, layout)
        key = (codes[0], offset) if codes else None
        source = where.get(key)
        if source is None and codes:
            source = where[key] = f"{os.path.basename(codes[0].co_filename)}:{line_at(codes[0], offset)}"
        made.append({"op": getattr(func, "__name__", "?"),
                     "inputs": [{"shape": list(i[1]), "stride": list(i[2])} for i in ins],
                     "output": None if out is None else {"shape": list(out[1]), "stride": list(out[2])},
                     "source": source})
    return made


def measure(layers: int, d_model: int, tokens: int, heads: int, rounds: int) -> dict:
    """Median overhead (seconds, over the same round's untraced forward) of each step; the untraced
    forward; the calls the bare logger saw; the plain pass's median seconds per row; the events of
    shapetrace's analysis and the median seconds of its inference and of its rules and report."""
    import torch

    import shapetrace
    user_stack_mode, identity_mode, exact_mode, frozen_mode = recorders()
    model = build_model(layers, d_model, heads)
    x = torch.randn(1, tokens, d_model)                                          # (B, T, D)
    counts, last = {}, {}

    def with_module_paths():
        with ModuleSlots() as slots, identity_mode(slots.running) as mode:
            model(x)
        last["rows"] = mode.rows

    def least_with(recorder):
        def go():
            with ModuleSlots() as slots, recorder(slots.running):
                model(x)
        return go

    def under(make):
        def go():
            with make() as mode:
                model(x)
            counts["calls"] = len(mode.rows)
        return go

    dims = f"B=1 T={tokens} D={d_model} H={heads}"
    stages: dict[str, list[float]] = {"inference": [], "rules": []}

    def traced():
        with shapetrace.trace(dims=dims):
            model(x)

    def analysed():
        with shapetrace.trace(dims=dims) as trace:
            model(x)
        start = time.thread_time()
        counts["events"] = len(trace.events)       # every pass of engine/infer
        inferred = time.thread_time()
        trace.report()                             # the rules, the verdict, the contracts
        stages["inference"].append(inferred - start)
        stages["rules"].append(time.thread_time() - inferred)

    kinds = {"untraced": lambda: model(x), "bare": under(bare_logger), "floor": under(capture_floor),
             "+user stack": under(user_stack_mode), "+identity": under(identity_mode),
             "+module path": with_module_paths, "+exact identity": least_with(exact_mode),
             "+frozen args": least_with(frozen_mode), "shapetrace recording": traced, "shapetrace analysis": analysed}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    passes = []
    with torch.no_grad():
        for go in kinds.values():   # warm-up
            go(), go()
        stages["inference"].clear(), stages["rules"].clear()
        for _ in range(rounds):
            for kind, go in kinds.items():
                start = time.thread_time()
                go()
                times[kind].append(time.thread_time() - start)
            start = time.thread_time()
            plain_rows(last["rows"])
            passes.append((time.thread_time() - start) / len(last["rows"]))
    untraced = times["untraced"]
    result = {"untraced": statistics.median(untraced), "calls": counts["calls"], "pass": statistics.median(passes),
              "events": counts["events"], **{stage: statistics.median(t) for stage, t in stages.items()}}
    for kind in STEPS:
        result[kind] = statistics.median(t - u for t, u in zip(times[kind], untraced))
    return result


def report(m: dict, layers: int, d_model: int, tokens: int, heads: int, rounds: int) -> str:
    calls, bare, untraced = m["calls"], m["bare"], m["untraced"]
    lines = [f"{layers} layers, D {d_model}, T {tokens}, H {heads}: medians of {rounds} interleaved rounds, "
             f"1 thread, thread CPU time; {calls} calls; untraced forward {untraced * 1e3:.2f} ms"]
    for kind in STEPS:
        over = m[kind]
        lines.append(f"  {kind:20s} {over / calls * 1e6:7.1f} µs/call  ratio {over / bare:5.2f}x bare  "
                     f"traced / untraced {(untraced + over) / untraced:5.2f}x")
    least = m["+module path"]
    per_call = m["pass"] * calls   # the plain pass over as many rows as calls
    lines.append(f"  plain pass           {m['pass'] * 1e6:7.1f} µs/call  ratio {per_call / bare:5.2f}x bare  "
                 "(one dict per call, nothing named)")
    with_pass = least + per_call
    lines.append(f"  least capture + plain pass: ratio {with_pass / bare:.2f}x bare (target for every fact <= 5x), "
                 f"traced / untraced {(untraced + with_pass) / untraced:.2f}x (target <= 1.3x at D 256)")
    lines.extend(issue_38(m))
    return "\n".join(lines)


def issue_38(m: dict) -> list[str]:
    """The ratios issue 38's "done means" reads: recording over the least capture, the analysis per
    event, and the forward with every fact over the untraced one."""
    events, untraced, least = max(m["events"], 1), m["untraced"], m["+module path"]
    recording, exact, frozen = m["shapetrace recording"], m["+exact identity"], m["+frozen args"]
    return [f"  shapetrace recording / least capture: ratio {recording / least:.2f}x (target <= 1.25x)",
            f"  exact identity / least capture: ratio {exact / least:.2f}x, with frozen arguments "
            f"{frozen / least:.2f}x; shapetrace recording / exact identity {recording / exact:.2f}x, / with frozen "
            f"arguments {recording / frozen:.2f}x",
            f"  analysis after the run, {m['events']} events: inference {m['inference'] / events * 1e6:.1f} µs/event "
            f"(target <= 12), rules and report {m['rules'] / events * 1e6:.1f} µs/event",
            f"  traced with every fact / untraced: ratio {(untraced + m['shapetrace analysis']) / untraced:.2f}x "
            "(target <= 1.5x at D 256)"]


def measure_decode(steps: int, rounds: int) -> dict:
    """A KV-cache decode loop as ``shapetrace run --decode`` runs it (the reference's cached attention,
    ``app.shapes.decode``: a prefill over the prompt, then ``steps`` one-token steps), untraced, recorded,
    and recorded with every fact (``trace.report()``), interleaved round by round: medians of thread
    CPU time, and the calls the trace recorded."""
    import torch

    import shapetrace
    from shapetrace.app.shapes import decode, decode_models
    from shapetrace.attention.config import AttentionConfig

    config = AttentionConfig(decode=1)   # (the models; the command caps --decode, the loop here runs ``steps``)
    model, _plain, x = decode_models(config, "cpu")
    dims = " ".join(f"{k}={v}" for k, v in config.dims.items())
    counts: dict[str, int] = {}

    def recorded():
        with shapetrace.trace(dims=dims) as trace:
            decode(model, x, steps)
        counts["calls"] = len(trace.capture.records)
        return trace

    kinds = {"untraced": lambda: decode(model, x, steps), "shapetrace recording": recorded,
             "shapetrace analysis": lambda: recorded().report()}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    with torch.no_grad():
        for go in kinds.values():   # warm-up
            go()
        for _ in range(rounds):
            for kind, go in kinds.items():
                start = time.thread_time()
                go()
                times[kind].append(time.thread_time() - start)
    return {"steps": steps, "rounds": rounds, "prompt": config.seq_len, "d_model": config.d_model,
            "heads": config.heads, "batch": config.batch, "calls": counts["calls"],
            **{kind: statistics.median(t) for kind, t in times.items()}}


def report_decode(m: dict) -> str:
    """The decode loop's block: each traced kind's cost per recorded call and its time over the untraced loop's
    (issue 38: a 200-step decode loop traced in <= 2x its untraced time)."""
    untraced, calls = m["untraced"], m["calls"]
    steps = f"{m['steps']} step{'s' * (m['steps'] != 1)}"
    lines = [f"decode loop: {steps} after a {m['prompt']}-token prompt (D {m['d_model']}, H {m['heads']}, "
             f"B {m['batch']}): medians of {m['rounds']} interleaved rounds, 1 thread, thread CPU time; {calls} "
             f"calls recorded; untraced {untraced * 1e3:.2f} ms"]
    for kind, target in (("shapetrace recording", ""), ("shapetrace analysis", " (target <= 2x)")):
        lines.append(f"  {kind:20s} {(m[kind] - untraced) / calls * 1e6:7.1f} µs/call  traced / untraced "
                     f"{m[kind] / untraced:5.2f}x{target}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--decode-steps", type=int, default=200)
    known, rest = parser.parse_known_args(argv)
    run_sizes(__doc__.splitlines()[0], measure, report, rounds=11, argv=rest)
    if known.decode_steps > 0:
        rounds = parse_rounds(rest, default=11)
        print("\n" + report_decode(measure_decode(known.decode_steps, rounds)), flush=True)


def parse_rounds(argv: list[str], default: int) -> int:
    """The ``--rounds`` the sizes were measured with (the decode loop takes as many)."""
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--rounds", type=int, default=default)
    return parser.parse_known_args(argv)[0].rounds


if __name__ == "__main__":
    main()
