"""Python's cyclic garbage collector, held off what a trace keeps while it records (and given back)."""

from __future__ import annotations

import gc


def hold_collector() -> tuple[bool, tuple[int, int, int] | None]:
    """Keep Python's cyclic garbage collector off what recording keeps, until the trace ends. Returns
    ``(froze, thresholds)``: what :func:`release_collector` undoes.

    Recording keeps a few objects per op, and the collector walks surviving objects again and again:
    each full collection walks every object in the process (with torch imported, about 170,000), and
    each middle-generation one every survivor of the young one. So while a trace records, the objects
    alive at its start are set aside (``gc.freeze``: only where nothing else froze any, so a process
    that froze its own keeps them frozen), and the middle and old generations wait (their thresholds
    raised). The young generation is still collected, less often (:data:`_YOUNG` allocations), so cycles
    the traced code drops soon are freed during the run; the rest wait for the collector after the trace.
    """
    if not gc.isenabled():
        return False, None
    froze = not gc.get_freeze_count()
    if froze:
        gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _YOUNG), _WAIT, _WAIT)
    return froze, thresholds


def release_collector(held: tuple[bool, tuple[int, int, int] | None]) -> None:
    froze, thresholds = held
    if froze:
        gc.unfreeze()
    if thresholds is not None and gc.get_threshold()[1:] == (_WAIT, _WAIT):   # unless the traced code set its own
        gc.set_threshold(*thresholds)


_WAIT = 1 << 30   # a generation threshold never reached while a trace records
#: the young generation's threshold while a trace records: each record allocates a few tuples, and at
#: Python's default (700) a young collection ran every ~20 recorded calls (about a tenth of recording)
_YOUNG = 20_000
