"""A trace exited in another thread (a generator closed there) records nothing more and leaves torch's
mode stack and nn.Module._call_impl as they were (issue 22, item 6)."""

from __future__ import annotations

import threading

import torch

import shapetrace


def _traced():
    with shapetrace.trace(dims="B=1 T=2") as t:
        yield t


def test_a_trace_closed_in_another_thread_stops_recording_and_is_taken_off_the_stack():
    call = torch.nn.Module._call_impl
    g = _traced()
    t = next(g)
    torch.zeros(4).view(2, 2)                                  # recorded
    closer = threading.Thread(target=g.close)
    closer.start()
    closer.join()
    torch.zeros(4).view(2, 2)                                  # after the exit: not recorded
    assert [e.op for e in t.events] == ["view"]
    assert torch.nn.Module._call_impl is call
    with shapetrace.trace() as u:                              # the next trace of this thread tidies up
        torch.zeros(4).view(2, 2)
    assert [e.op for e in u.events] == ["view"]
    assert torch.overrides._get_current_function_mode_stack() == []
