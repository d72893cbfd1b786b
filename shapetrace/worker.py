"""The checker's child process: started by :mod:`shapetrace.exercises.sandbox`, never by hand.

Two entries: :func:`main`, one check, and :func:`fork_server`, which imports what every check needs once
and then forks a process per check that runs :func:`main` (:mod:`shapetrace.exercises.forks`).

An entry point, like ``__main__.py`` (so it sits at the top, above every layer). It decides nothing.
It arrives as source text over its standard input (:data:`shapetrace.exercises.isolation.BOOT`),
inside a bubblewrap sandbox, and reads its request from the same pipe: the learner's source, the
inputs the parent drew (plain values, :mod:`shapetrace.exercises.plain`: no seed, no pickle), and the
folders it may read. It imports what it needs, then puts the kernel's layers on itself for good
(:func:`shapetrace.exercises.confine.confine`: Landlock, seccomp, rlimits), reports which layers did
not take hold, and only then runs the learner's file. What comes back is plain data on a private
channel; the parent judges. For a function, the parent answers each case's result with one byte on the
request's pipe (:func:`_answered`): the next case when it was right; else this case's traced table (the one
a verdict shows) and stop.

For a learner-written test, the request ends with a secret section (the implementation under test)
that this process never reads: it forks first, and the forked process reads it, confines itself and
runs the implementation for the test (:mod:`shapetrace.exercises.remote`); this one closes the pipe.
"""

from __future__ import annotations

import gc
import json
import linecache
import os
import sys


class Channel:
    """Frames to the parent on a file descriptor the learner's prints never reach."""

    def __init__(self, fd: int):
        from shapetrace.exercises.frames import encode
        from shapetrace.exercises.plain import pack

        self.fd, self._encode, self._pack, self._write = fd, encode, pack, os.write  # bound before learner code

    def send(self, header: dict, values: dict | None = None, facts: dict | None = None) -> None:
        data = self._pack(values or {}, facts) if values is not None or facts is not None else b""
        view = memoryview(self._encode(header, data))
        while view:
            view = view[self._write(self.fd, view):]


def _private_channel() -> Channel:
    """Keep the real stdout for frames; fd 1 then points at stderr (stray C-level prints land there)."""
    fd = os.dup(1)
    os.dup2(2, 1)
    return Channel(fd)


def _read_exact(n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            raise SystemExit(3)
        data += chunk
    return bytes(data)


def read_request() -> tuple[dict, dict]:
    """The request on standard input: ``(meta, values)``; the pipe is closed afterwards, except for a
    learner-written test, whose secret section (the implementation) is left unread for the server, and for
    a request that asks for the parent's word after each case (``replies``: :func:`_reply_reader`)."""
    from shapetrace.exercises.plain import unpack

    meta = json.loads(_read_exact(int.from_bytes(_read_exact(8), "big")))
    body = _read_exact(int.from_bytes(_read_exact(8), "big"))
    if meta.get("kind") != "test" and meta.get("replies"):
        _read_exact(int.from_bytes(_read_exact(8), "big"))  # (the secret section, empty: the replies follow it)
    elif meta.get("kind") != "test":
        os.close(0)
    values = unpack(body, limit=64 << 20)[0] if body else {}
    return meta, values


def _describe(value) -> str:
    from shapetrace.exercises.judge import short

    return short(value)


def _storages(args) -> list[int]:
    return [a.untyped_storage().data_ptr() if hasattr(a, "untyped_storage") else 0 for a in args]


def _reply_reader():
    """The parent's word after each case, one byte at a time, on a private copy of standard input (the pipe
    the request came on; standard input itself is closed); b"" once the parent is gone."""
    fd, read = os.dup(0), os.read
    os.close(0)

    def replies() -> bytes:
        try:
            return read(fd, 1)
        except OSError:
            return b""
    return replies


def _answered(channel: Channel, replies, case: int, trace, width: int) -> bool:
    """Whether to go on after a case, by the parent's word: ``n`` (it was right: the next case), ``t`` (it
    decides the verdict: send its traced table, the one table a verdict shows, then stop), anything else
    stop. A case's table is rendered only when the parent asks for it."""
    word = replies()
    if word == b"t":
        from shapetrace.render.exercise import trace_table

        channel.send({"kind": "table", "case": case}, facts={"table": trace_table(trace, width) if width else ""})
    return word == b"n"


def _run_case(fn, args, names, dims, path, limit, width, show_all=False, watch=None):
    import contextlib

    from shapetrace.engine.unrowed import recording_every_call
    from shapetrace.exercises.calls import CheckTimeout, call, start_clock, stop_clock
    from shapetrace.exercises.facts import learner_facts

    timed_out, before = False, _storages(args)
    watcher = watch(path) if watch is not None else None   # (a write-a-backward exercise: did it ask autograd?)
    try:
        start_clock(limit)
        with recording_every_call() if show_all else contextlib.nullcontext():   # (--all: every call gets a row)
            got = call(fn, args, names, dims, path=path, watch=watcher)
    except CheckTimeout as exc:
        from shapetrace.exercises.calls import Outcome, learner_frame

        got, timed_out = Outcome(exc=exc, frame=learner_frame(exc, path)), True
    finally:
        stop_clock()
    from shapetrace.render.exercise import trace_table

    facts = learner_facts(got, path, timed_out, _describe(got.value), type(got.value).__name__)
    facts["table"] = trace_table(got.trace, width) if width else ""   # (a grade shows no table: none made)
    facts["swapped"] = [i for i, (a, b) in enumerate(zip(before, _storages(args))) if a != b]
    facts["autograd"] = watcher.found if watcher is not None else None
    return {"value": got.value, "args": list(args)}, json.loads(json.dumps(facts, default=str)), got.trace


def _preload() -> None:
    """Import everything the check needs while files may still be read; torch on one thread."""
    import random  # noqa: F401

    import numpy  # noqa: F401  (the probe's sender hands torch's memory to os.write through numpy)
    import torch

    torch.set_num_threads(1)

    # (dependencies, padding, pooled_read, probe_inputs, readings, report...: what a trace imports only when it ends or
    # is read, lazily for the CLI's start; imported here once, not compiled from source in every forked check)
    from shapetrace.engine import (  # noqa: F401
        declared,
        dependencies,
        grouped_positions,
        lengths_read,
        padding,
        pooled_read,
        probe_inputs,
        propagate,
        readings,
        report,
        tracer,
        unattended,
        unrowed,
    )
    from shapetrace.engine.rules import diagnose  # noqa: F401
    from shapetrace.exercises import (  # noqa: F401
        autograd_watch,
        calls,
        confine,
        explain_check,
        facts,
        frames,
        judge,
        plain,
        remote,
        sealed,
    )
    from shapetrace.render import exercise as _exercise  # noqa: F401
    from shapetrace.render import table as _table  # noqa: F401

    confine.preload()


def main() -> int:
    import resource

    meta, values = read_request()
    from shapetrace.exercises.cpus import pin

    pin(meta.get("cpus"))  # a grade's slot: this check's CPUs alone, for it and every thread and process it starts
    channel = _private_channel()
    import torch

    _preload()
    from shapetrace.exercises.confine import confine
    from shapetrace.exercises.inputs import Inputs

    cases = [Inputs(c["case"], list(values[f"case{i}"]), c["names"], c["dims"], c["sizes"])
             for i, c in enumerate(meta.get("cases") or [])]
    probe = _probe(meta, channel)
    (torch.ones(2, 3) @ torch.ones(3, 2)).softmax(-1)  # warm up any lazy pools before threads are refused
    path, source = meta["path"], meta["source"]
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    memory = int(meta["memory_bytes"])
    if probe is not None:  # the kernel's cap decides "no extra copy": what is held now + allowed + slack
        memory = min(memory, int(meta["probe"]["allow_bytes"]) + int(meta["probe"]["slack_bytes"]))
    used = resource.getrusage(resource.RUSAGE_SELF)
    from shapetrace.exercises.confine import LAYERS

    layers = [name for name in LAYERS if name in meta.get("layers", LAYERS)]
    cpu = int(used.ru_utime + used.ru_stime) + int(meta["cpu_seconds"])

    def confined() -> list[str]:
        return confine(list(meta["readable"]), memory, cpu, layers)

    server = _start_server(channel, confined) if meta.get("kind") == "test" else None
    replies = _reply_reader() if meta.get("replies") and server is None else None
    missing = confined()
    if server is not None:
        missing += server.hello()
    channel.send({"kind": "ready", "missing": missing})
    _check(channel, meta, cases, source, probe, server, replies)
    return 0


def plain_fork_server() -> int:
    """The fork server outside bubblewrap (bubblewrap turned off or unable to start): its checks take no
    namespaces of their own, as a child started without bubblewrap took none."""
    return fork_server(namespaces=False)


def fork_server(namespaces: bool = True) -> int:
    """The fork server (:mod:`shapetrace.exercises.forks`): import what every check needs once, then fork
    one process per check, each running :func:`main`. Standard output is its control socket."""
    import socket

    import torch

    _preload()
    (torch.ones(2, 3) @ torch.ones(3, 2)).softmax(-1)  # warm up any lazy pools once, for every check
    # Everything alive now is every check's and never garbage: set aside from the collector, a check's
    # collections neither walk it nor write its pages (each write copies a page the fork shared)
    gc.collect()
    gc.freeze()
    from shapetrace.exercises.forks import huge_pages, serve

    huge_pages()  # (each check is a fork of this process: 2 MB pages make each fork copy less)
    control = socket.socket(fileno=os.dup(1))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the modules' pipe, read to the end by the boot code
    os.dup2(2, 1)  # stray prints go to stderr, never into the control socket
    os.close(null)
    return serve(control, main, namespaces)


def _start_server(channel: Channel, confined):
    """Fork the process that holds the implementation under test (before any layer or learner code);
    standard input, where the implementation still waits unread, is closed here at once."""
    from shapetrace.exercises.remote import read_secret, start

    try:
        return start(read_secret, confined, close=[channel.fd])
    finally:
        os.close(0)


def _probe(meta: dict, channel: Channel):
    """The large input and a raw sender, built before the sandbox closes (None for an exercise without one)."""
    if not meta.get("probe"):
        return None
    from shapetrace.exercises.probe import probe_inputs, sender

    inputs = probe_inputs(meta["inputs"], int(meta["probe"]["seed"]))
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
    fail(case, json.loads(json.dumps(facts, default=str)))


def _load(channel: Channel, meta: dict, source: str):
    """The learner's function, or None after reporting why it could not be loaded."""
    from shapetrace.exercises.calls import (
        CheckTimeout,
        LoadFailure,
        Outcome,
        function_from_file,
        learner_frame,
        start_clock,
        stop_clock,
    )
    from shapetrace.exercises.facts import load_facts

    path, limit = meta["path"], float(meta["time_limit"])
    channel.send({"kind": "start", "case": -1})
    try:
        start_clock(limit)
        fn = function_from_file(source, path, meta["function"])
    except LoadFailure as failure:
        stop_clock()
        channel.send({"kind": "loaded"}, facts=json.loads(json.dumps(load_facts(failure.outcome, path), default=str)))
        return None
    except CheckTimeout as exc:
        stop_clock()
        out = Outcome(exc=exc, frame=learner_frame(exc, path))
        channel.send({"kind": "loaded"}, facts=load_facts(out, path, timed_out=True))
        return None
    stop_clock()
    channel.send({"kind": "loaded"})
    return fn


def _check(channel: Channel, meta: dict, cases: list, source: str, probe=None, server=None, replies=None) -> None:
    """Load the learner's file and run its cases, sending each result as it comes. With ``replies`` (the
    parent's word after each case, :func:`_answered`), the cases stop at the first one the parent finds
    wrong and only its table is rendered; without, every case runs with its table (``meta["tables"]``)."""
    path, limit = meta["path"], float(meta["time_limit"])
    width = int(meta["width"]) if meta.get("tables", True) else 0   # 0: no case's table is rendered
    show_all = bool(meta.get("show_all"))
    run_probe, run_case, run_tests, answered = _run_probe, _run_case, _run_tests, _answered  # bound before the
    # learner's file runs
    guard = _guard() if meta.get("kind") == "test" else None  # torch's classes, bound before the file runs
    watch = _autograd_watch() if meta.get("watch_autograd") else None   # bound before the file runs, too
    fn = _load(channel, meta, source)
    if fn is None:
        return
    if guard is not None:
        run_tests(channel, fn, meta, path, limit, guard, server)
        return
    if probe is not None:  # first, while the address space is as the cap was measured
        run_probe(channel, fn, probe, len(cases), path, limit)
        probe = None
    for i, case in enumerate(cases):
        channel.send({"kind": "start", "case": i})
        values, facts, trace = run_case(fn, case.args, case.names, case.dims, path, limit,
                                        0 if replies is not None else width, show_all, watch)
        channel.send({"kind": "case", "case": i}, values, facts)
        if (facts.get("exc") or {}).get("timed_out"):   # the verdict is this timeout: more cases only wait
            break
        if replies is not None and not answered(channel, replies, i, trace, width):
            break


def _autograd_watch():
    from shapetrace.exercises.autograd_watch import AutogradWatch

    return AutogradWatch


def _guard():
    from shapetrace.exercises.sealed import Guard

    return Guard()


def _run_tests(channel: Channel, fn, meta: dict, path: str, limit: float, guard, server) -> None:
    """Call the learner's test ``runs`` times on the one implementation (in its own process, ``server``);
    report whether it raised, and what. A run that times out is the last: the implementation's result is
    the first run that timed out whatever follows (:func:`shapetrace.exercises.checker._settled`), so more
    runs would only burn their time limits (a spinning test: 3 limits per implementation, now 1)."""
    from shapetrace.exercises.calls import CheckTimeout, Outcome, call, learner_frame, start_clock, stop_clock
    from shapetrace.exercises.facts import load_facts
    from shapetrace.exercises.sealed import facades

    subjects = [str(s) for s in meta["subjects"]]
    for i in range(int(meta["runs"])):
        channel.send({"kind": "start", "case": i})
        try:
            start_clock(limit)
            got, timed_out = call(fn, facades(server, subjects, guard), [], {}, path=path, traced=False), False
        except CheckTimeout as exc:
            got, timed_out = Outcome(exc=exc, frame=learner_frame(exc, path)), True
        finally:
            stop_clock()
        facts = load_facts(got, path, timed_out)
        facts["returned"] = None if got.value is None else type(got.value).__name__
        channel.send({"kind": "case", "case": i}, facts=json.loads(json.dumps(facts, default=str)))
        if timed_out:   # this implementation's result is this timeout (checker._settled): more runs only wait
            break


if __name__ == "__main__":
    sys.exit(main())
