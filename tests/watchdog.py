"""pytest-timeout's per-test limit (``timeout`` in pyproject.toml, the thread method) kept by one thread per
worker instead of one new thread per test.

pytest-timeout's thread method starts a ``threading.Timer`` for every test, joins it after, and keeps it
(with its lock, condition and closures) on the test's item until the run ends: 7,400 threads started
and joined, and 1,904 timers still alive at the end of tests/corpus alone, walked by every full garbage
collection after. It lets a plugin keep the limit its own way (``pytest_timeout_set_timer`` and
``pytest_timeout_cancel_timer``, first result wins): here one daemon thread waits for the deadline of
the test that runs now, and a test past its limit ends the process exactly as pytest-timeout's own
timer does (:func:`pytest_timeout.timeout_timer`: the captured output and every thread's stack, then
``os._exit(1)``). The signal method, and a run that has no pytest-timeout, are left to pytest-timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest


class Watchdog:
    """One thread that calls ``fire(item, settings)`` when the armed test outlives its deadline."""

    def __init__(self, fire: Callable, clock: Callable[[], float] = time.monotonic):
        self._fire, self._clock = fire, clock
        self._changed = threading.Condition()
        self._armed: tuple | None = None   # (deadline, item, settings) of the test that runs now
        threading.Thread(target=self._watch, name="test time limit", daemon=True).start()

    def arm(self, item, settings) -> None:
        with self._changed:
            self._armed = (self._clock() + settings.timeout, item, settings)
            self._changed.notify()

    def disarm(self) -> None:
        with self._changed:
            self._armed = None   # (the thread, woken at the old deadline, finds nothing armed and waits on)

    def _watch(self) -> None:
        with self._changed:
            while True:
                armed = self._armed
                left = None if armed is None else armed[0] - self._clock()
                if left is not None and left <= 0:
                    break
                self._changed.wait(left)
        self._fire(armed[1], armed[2])


_watchdog: Watchdog | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    global _watchdog
    if settings.method != "thread":
        return None
    if _watchdog is None:
        from pytest_timeout import timeout_timer

        _watchdog = Watchdog(timeout_timer)
    _watchdog.arm(item, settings)
    item.cancel_timeout = _watchdog.disarm   # (pytest-timeout's own cancel hook calls it)
    return True
