"""Python's cyclic garbage collector, held off what a trace keeps while it records or is analysed (and
given back)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def hold_collector() -> tuple[int, int, int] | None:
    """Keep Python's cyclic garbage collector off what recording keeps, until the trace ends. Returns
    the thresholds :func:`release_collector` puts back (None when the collector is off).

    Recording keeps a few objects per op, and the collector walks surviving objects again and again:
    each full collection walks every object in the process (with torch imported, about 170,000), and
    each middle-generation one every survivor of the young one. So while a trace records, the middle and
    old generations wait (their thresholds raised). The young generation is still collected, less often
    (:data:`_YOUNG` allocations), so cycles the traced code drops soon are freed during the run; the
    rest wait for the collector after the trace. A young collection walks only the young generation, so
    nothing needs setting aside (``gc.freeze``), and nothing asks what is frozen: ``gc.get_freeze_count``
    walks every frozen object, ~20 ms of CPU per trace in a process that froze its objects (the CLI does).
    """
    if not gc.isenabled():
        return None
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _YOUNG), _WAIT, _WAIT)
    return thresholds


def release_collector(thresholds: tuple[int, int, int] | None) -> None:
    if thresholds is not None and gc.get_threshold()[1:] == (_WAIT, _WAIT):   # unless the traced code set its own
        gc.set_threshold(*thresholds)


@contextlib.contextmanager
def collector_held() -> Iterator[None]:
    """:func:`hold_collector` for the length of a block: the analysis after the run makes many small
    objects (events, axes, names) that live as long as the trace, and at Python's default thresholds
    full collections walked them, and every object torch keeps, again and again (inference per event
    grew with the trace's length). Nested blocks hold it once."""
    thresholds = hold_collector()
    try:
        yield
    finally:
        release_collector(thresholds)


_WAIT = 1 << 30   # a generation threshold never reached while a trace records
#: the young generation's threshold while a trace records: each record allocates a few tuples, and at
#: Python's default (700) a young collection ran every ~20 recorded calls (about a tenth of recording)
_YOUNG = 20_000
