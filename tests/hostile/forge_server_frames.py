# exercise: test-split-square
# verdict: rejects-reference
# expect: RuntimeError: the implementation under test stopped: its process ended before it answered
# Writes its own frames on the pipe the implementation's process reads (the fd found through the facade's
# closure, as a learner can: the pipe itself is no secret): first a well-formed call whose storages claim
# more bytes than it carries, then a frame header that announces an exabyte body, hoping to make the
# server answer for the reference whatever this test asks, or to take it over with a frame it cannot hold.
# Stopped by: the server decodes only bounded plain data (shapetrace/exercises/remote.py, frames.py,
# plain.py): the forged call is refused with an error reply, the oversized frame is refused by its
# length before anything is buffered and ends the server; the facade then raises on every call, so the
# test can no longer pass the reference.
import json
import os
import struct


def _send_fd(split_heads) -> int:
    enter = split_heads.__globals__["_enter"]
    for cell in enter.__closure__:
        call = cell.cell_contents
        if hasattr(call, "__self__") and hasattr(call.__self__, "send_fd"):
            return call.__self__.send_fd
    raise AssertionError("no pipe behind the facade")


def _frame(header: dict, body: bytes, claimed: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return b"STF1" + struct.pack(">I", len(text)) + text + struct.pack(">Q", len(body) if claimed is None
                                                                       else claimed) + body


def check(split_heads):
    fd = _send_fd(split_heads)
    lie = json.dumps({"k": 0, "args": [], "kwargs": [], "storages": [1 << 40]}).encode()
    os.write(fd, _frame({"kind": "call", "n": 10**6}, len(lie).to_bytes(4, "big") + lie))
    os.write(fd, _frame({"kind": "call", "n": 10**6 + 1}, b"", claimed=1 << 60))
    import torch

    out = split_heads(torch.zeros(2, 3, 8), 4)  # (B, H, T, d_k)
    assert out.shape == (2, 4, 3, 2)
