"""Each check of a grade on CPUs of its own (no torch).

A check's limits are wall-clock (a phase's deadline, the whole check's), and a check may start up to
:data:`.confine.MAX_TASKS` threads. The grader runs a few checks at once; if they shared every CPU, one
student's file spinning 60 threads (torch releases the GIL in its ops) would slow a classmate's honest
check into its deadline. So the grader divides the CPUs this process may use into one set per check it
runs at once (:func:`divide`, :class:`Slots`), hands each check the set of the slot it runs in, and the
check pins itself to that set (:func:`pin`, in the child, before any learner code runs;
``sched_setaffinity`` is then refused by the seccomp filter, so learner code cannot widen it). A check's
threads and the process holding a test's implementation inherit the set. What a check burns is also
capped in CPU seconds (``RLIMIT_CPU``, :func:`.confine.limits`), counted over all its threads.

A check run alone (``exercise check``) is not pinned: it has no classmate to slow.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterator
from contextlib import contextmanager


def allowed() -> list[int]:
    """The CPUs this process may run on (every CPU where the kernel cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def divide(cpus: list[int], slots: int) -> list[tuple[int, ...]]:
    """``cpus`` split into ``slots`` disjoint sets of consecutive CPUs, as even as can be; with more slots
    than CPUs, each slot gets one CPU and slots share them in turn (never an empty set).

    >>> divide([0, 1, 2, 3, 4], 2), divide([0, 1], 3)
    ([(0, 1, 2), (3, 4)], [(0,), (1,), (0,)])
    """
    slots = max(1, slots)
    if slots >= len(cpus):
        return [(cpus[i % len(cpus)],) for i in range(slots)]
    size, extra = divmod(len(cpus), slots)
    out, start = [], 0
    for i in range(slots):
        end = start + size + (i < extra)
        out.append(tuple(cpus[start:end]))
        start = end
    return out


class Slots:
    """The grader's slots: one CPU set per check it runs at once; a worker takes a free one for each
    check (:meth:`take`) and gives it back when the check ends."""

    def __init__(self, slots: int, cpus: list[int] | None = None):
        self.sets = divide(allowed() if cpus is None else cpus, slots)
        self.free: queue.SimpleQueue[tuple[int, ...]] = queue.SimpleQueue()
        for cpu_set in self.sets:
            self.free.put(cpu_set)

    @contextmanager
    def take(self) -> Iterator[tuple[int, ...]]:
        cpu_set = self.free.get()
        try:
            yield cpu_set
        finally:
            self.free.put(cpu_set)


def pin(cpus) -> str:
    """In the check's child, before learner code: run on ``cpus`` alone (None or empty: leave it); '' when
    it took hold (or there was nothing to do), else why not."""
    if not cpus:
        return ""
    try:
        os.sched_setaffinity(0, [int(c) for c in cpus])
    except (AttributeError, OSError, ValueError, TypeError) as exc:
        return f"CPU set: {type(exc).__name__}"
    return ""
