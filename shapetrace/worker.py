"""The checker's child process: ``python -m shapetrace.worker REQUEST.json``.

An entry point, like ``__main__.py`` (so it sits at the top, above every layer). It decides nothing:
it loads the learner's file, calls the function on the inputs the parent drew, and sends back plain
data (tensors, numbers, text) as frames on a private channel (see :mod:`shapetrace.exercises.frames`).
The parent, which never imports the learner's code, loads the tensors with ``weights_only`` and judges.

Before the learner's file is read, the child locks itself down for good
(:func:`shapetrace.exercises.lockdown.lock_down`): hard limits, no capabilities, no new processes,
no file writes, and no reading of the reference solutions (a try is reported as giving up).
"""

from __future__ import annotations

import io
import json
import linecache
import os
import signal
import sys


class Channel:
    """Frames to the parent on a file descriptor the learner's prints never reach."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, header: dict, body: dict | None = None) -> None:
        from shapetrace.exercises.frames import encode

        data = b""
        if body is not None:
            import torch

            buf = io.BytesIO()
            torch.save(body, buf)
            data = buf.getvalue()
        view = memoryview(encode(header, data))
        while view:
            view = view[os.write(self.fd, view):]


def _private_channel() -> Channel:
    """Keep the real stdout for frames; fd 1 then points at stderr (stray C-level prints land there)."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return Channel(fd)


def _plain(value):
    """A plain tensor, int, float, bool, str or None that ``torch.load(weights_only=True)`` accepts."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach()
        return t if type(t) is torch.Tensor else t.as_subclass(torch.Tensor)
    if value is None or type(value) in (int, float, bool, str):
        return value
    return None


def _describe(value) -> str:
    from shapetrace.exercises.judge import short

    return short(value)


def _run_case(fn, args, names, dims, path, limit, width):
    from shapetrace.exercises.calls import CheckTimeout, call, start_clock, stop_clock
    from shapetrace.exercises.facts import learner_facts

    timed_out = False
    try:
        start_clock(limit)
        got = call(fn, args, names, dims, path=path)
    except CheckTimeout as exc:
        from shapetrace.exercises.calls import Outcome, learner_frame

        got, timed_out = Outcome(exc=exc, frame=learner_frame(exc, path)), True
    finally:
        stop_clock()
    from shapetrace.render.exercise import trace_table

    facts = learner_facts(got, path, timed_out, _describe(got.value), type(got.value).__name__)
    facts["table"] = trace_table(got.trace, width)
    return {"value": _plain(got.value), "args": [_plain(a) for a in args],
            "facts": json.dumps(facts, default=str)}, timed_out


def main(argv: list[str]) -> int:
    import torch

    with open(argv[1], encoding="utf-8") as fh:
        meta = json.load(fh)
    channel = _private_channel()
    torch.set_num_threads(1)
    import random

    from shapetrace.engine import diagnose, propagate, tracer  # noqa: F401  (before the lockdown)
    from shapetrace.exercises import calls, facts, frames, judge  # noqa: F401
    from shapetrace.exercises.inputs import draw
    from shapetrace.exercises.lockdown import lock_down
    from shapetrace.render import exercise as _exercise  # noqa: F401
    from shapetrace.render import table as _table  # noqa: F401

    cases = [] if meta.get("kind") == "test" else draw(meta["inputs"], random.Random(int(meta["seed"])))
    probe = _probe(meta, channel)
    (torch.ones(2, 3) @ torch.ones(3, 2)).softmax(-1)  # warm up any lazy pools before threads are refused
    path = meta["path"]
    source = meta["source"]
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    memory = int(meta["memory_bytes"])
    if probe is not None:  # the kernel's cap decides "no extra copy": what is held now + allowed + slack
        memory = min(memory, int(meta["probe"]["allow_bytes"]) + int(meta["probe"]["slack_bytes"]))
    lock_down(memory, meta["protected"], on_peek=lambda p: channel.send({"kind": "peek", "path": p}))
    channel.send({"kind": "ready"})
    _check(channel, meta, cases, source, probe)
    return 0


def _probe(meta: dict, channel: Channel):
    """The large input and a raw sender, built before the lockdown (None for an exercise without one)."""
    if not meta.get("probe"):
        return None
    import numpy  # noqa: F401  (the sender hands torch's memory to os.write through numpy)

    from shapetrace.exercises.probe import probe_inputs, sender

    inputs = probe_inputs(meta["inputs"], int(meta["seed"]))
    return (inputs, *sender(channel.fd), dict(meta["probe"]))


def _run_probe(channel: Channel, fn, probe, case: int, path: str, limit: float) -> None:
    """Call the learner's function once on the large input, under the cap; stream the output back raw."""
    from shapetrace.exercises.calls import CheckTimeout, Outcome, learner_frame, start_clock, stop_clock
    from shapetrace.exercises.facts import load_facts

    inputs, send, fail, expected = probe
    channel.send({"kind": "start", "case": case})
    got, timed_out = Outcome(), False
    try:
        start_clock(limit)
        import torch

        with torch.no_grad():
            got.value = fn(*inputs.args)
    except CheckTimeout as exc:
        got, timed_out = Outcome(exc=exc, frame=learner_frame(exc, path)), True
    except (Exception, SystemExit) as exc:  # out of memory is the usual one: the cap held
        got = Outcome(exc=exc, frame=learner_frame(exc, path))
    finally:
        stop_clock()
    value = got.value
    if not got.raised and type(value).__name__ == "Tensor" and hasattr(value, "untyped_storage"):
        got = None
        send(case, value, expected)
        return
    facts = load_facts(got, path, timed_out)
    facts["short"] = _describe(value) if not got.raised else ""
    fail(case, json.dumps(facts, default=str))


def _check(channel: Channel, meta: dict, cases: list, source: str, probe=None) -> None:
    from shapetrace.exercises.calls import CheckTimeout, LoadFailure, function_from_file, start_clock, stop_clock
    from shapetrace.exercises.facts import load_facts

    path, limit, width = meta["path"], float(meta["time_limit"]), int(meta["width"])
    run_probe = _run_probe  # bound before the learner's file runs and could rebind the module's names
    channel.send({"kind": "start", "case": -1})
    try:
        start_clock(limit)
        fn = function_from_file(source, path, meta["function"])
    except LoadFailure as failure:
        stop_clock()
        channel.send({"kind": "loaded"}, {"facts": json.dumps(load_facts(failure.outcome, path), default=str)})
        return
    except CheckTimeout as exc:
        stop_clock()
        from shapetrace.exercises.calls import Outcome, learner_frame

        out = Outcome(exc=exc, frame=learner_frame(exc, path))
        channel.send({"kind": "loaded"}, {"facts": json.dumps(load_facts(out, path, timed_out=True))})
        return
    stop_clock()
    channel.send({"kind": "loaded"})
    if meta.get("kind") == "test":
        _run_tests(channel, fn, meta, path, limit)
        return
    if probe is not None:  # first, while the address space is as the cap was measured
        run_probe(channel, fn, probe, len(cases), path, limit)
        probe = None
    for i, case in enumerate(cases):
        channel.send({"kind": "start", "case": i})
        body, timed_out = _run_case(fn, case.fresh(), case.names, case.dims, path, limit, width)
        channel.send({"kind": "case", "case": i}, body)
        if timed_out:  # the verdict is this timeout: more cases would only make the learner wait
            break


def _implementation(code: str, subjects: list[str]) -> list:
    """The functions one implementation (lesson code the parent sent) defines, in the subjects' order."""
    namespace: dict = {}
    exec(compile(code, "<implementation under test>", "exec"), namespace)
    return [namespace[name] for name in subjects]


def _run_tests(channel: Channel, fn, meta: dict, path: str, limit: float) -> None:
    """Call the learner's test once per implementation; report only whether it raised, and what."""
    from shapetrace.exercises.calls import CheckTimeout, Outcome, call, learner_frame, start_clock, stop_clock
    from shapetrace.exercises.facts import load_facts

    for i, code in enumerate(meta["implementations"]):
        channel.send({"kind": "start", "case": i})
        try:
            start_clock(limit)
            got, timed_out = call(fn, _implementation(code, meta["subjects"]), [], {}, path=path, traced=False), False
        except CheckTimeout as exc:
            got, timed_out = Outcome(exc=exc, frame=learner_frame(exc, path)), True
        finally:
            stop_clock()
        facts = load_facts(got, path, timed_out)
        facts["returned"] = None if got.value is None else type(got.value).__name__
        channel.send({"kind": "case", "case": i}, {"facts": json.dumps(facts, default=str)})


if __name__ == "__main__":
    sys.exit(main(sys.argv))
