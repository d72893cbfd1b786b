"""The implementation under test in a process of its own (:mod:`shapetrace.exercises.remote`): the protocol.

In-process, no sandbox: the server runs in a thread on two pipes, so every tensor crosses as bytes and
layouts and is rebuilt on the other side, exactly as between the two processes of the checker's child.
Each call is compared with calling the implementation directly: values, dtype, shape, stride, offset,
whether the result shares the argument's storage, ``_base``, in-place effects, exception class and message.
The forked server (process death, the worker's wiring) is tested in a fresh interpreter at the end.
"""

from __future__ import annotations

import json
import os
import struct
import threading

import pytest
import torch
from conftest import ROOT

from shapetrace.exercises import remote
from shapetrace.exercises.frames import BadFrame, encode
from shapetrace.exercises.sealed import Guard, facades

SPLIT = ("def split_heads(x, heads):\n    B, T, D = x.shape\n"
         "    return x.view(B, T, heads, D // heads).transpose(1, 2)\n")


class Served:
    """A server in a thread; ``.fns`` the facades, ``.direct`` the same code compiled here."""

    def __init__(self, code: str, subjects: list[str]):
        self.fns_direct = remote.compile_implementation(code, subjects)
        request_r, self.request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        self.thread = threading.Thread(target=self._serve, args=(request_r, reply_w), daemon=True)
        self.ended = ""
        self.thread.start()
        self.client = remote.Client(self.request_w, reply_r, pid=0)
        assert self.client.hello() == []
        self.fns = facades(self.client, subjects, Guard())
        self.fds = [request_r, reply_w, reply_r]
        self.closed = False

    def _serve(self, request_r: int, reply_w: int) -> None:
        try:
            remote.serve(request_r, reply_w, self.fns_direct)
        except BadFrame as exc:
            self.ended = str(exc)
        finally:
            os.close(reply_w)  # the client then reads EOF: the server is gone

    def close(self) -> None:
        """Ends the server (EOF on its requests) and closes every descriptor it left here: the server's
        own end of the replies it closes itself; the two read ends are ours (once left open by every
        server, about 2,000 descriptors a test process by the end of test_reference_steady)."""
        if self.closed:
            return
        self.closed = True
        os.close(self.request_w)
        self.thread.join(5)
        if not self.thread.is_alive():   # (a server still running may still read its requests)
            os.close(self.fds[0])
            os.close(self.fds[2])


@pytest.fixture
def served():
    made = []

    def make(code: str, subjects=("f",)) -> Served:
        s = Served(code, list(subjects))
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _facts(t) -> tuple:
    return t.dtype, tuple(t.shape), t.stride(), t.storage_offset(), t.tolist()


def test_a_view_of_the_argument_is_a_view_of_the_learners_tensor(served):
    s = served(SPLIT, ["split_heads"])
    [split], [direct] = s.fns, s.fns_direct
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8).clone()  # (B, T, D), not a view itself
    y, want = split(x, 4), direct(x, 4)  # (B, H, T, d_k)
    assert _facts(y) == _facts(want) and y.stride() == (24, 2, 8, 1)
    assert want._base is x and y._base is x and y.data_ptr() == x.data_ptr() and not y.is_contiguous()
    y[0, 1, 2, 0] = -1.0  # writes through to the learner's tensor, as through the real view
    assert x[0, 2, 2].item() == -1.0
    assert _facts(split(x, heads=2)) == _facts(direct(x, heads=2))  # keyword arguments


def test_non_contiguous_and_offset_inputs_keep_their_layout(served):
    s = served("def f(x):\n    return x.transpose(0, 1)\n")
    buf = torch.arange(5 * 12.0).view(5, 12).clone()
    x = buf[1:4, 2:10:2]  # (3, 4) at offset 14, strides (12, 2)
    y = s.fns[0](x)
    want = s.fns_direct[0](x)
    assert _facts(y) == _facts(want) == (torch.float32, (4, 3), (2, 12), 14, want.tolist())
    assert y.data_ptr() == want.data_ptr() and y._base is buf


def test_aliasing_between_arguments_arrives_as_it_was_built(served):
    s = served("def f(a, b):\n    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr(), "
               "b.storage_offset() - a.storage_offset(), a.stride(), b.stride()\n")
    buf = torch.zeros(2, 4)
    assert s.fns[0](buf[0], buf[1]) == s.fns_direct[0](buf[0], buf[1]) == (True, 4, (1,), (1,))
    assert s.fns[0](buf[:, 0], torch.zeros(4)) == (False, -0, (4,), (1,))


def test_a_result_on_a_new_storage_is_no_view_and_shared_storages_stay_shared(served):
    s = served("def f(x):\n    return (x * 2).chunk(2, dim=-1)\n\ndef g(x):\n    return x * 2\n", ["f", "g"])
    x = torch.arange(8.0).view(2, 4)
    a, b = s.fns[0](x)
    wa, wb = s.fns_direct[0](x)
    assert (_facts(a), _facts(b)) == (_facts(wa), _facts(wb)) and b.storage_offset() == 2
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert a._base is not None and a._base is b._base  # views of one new tensor, as chunk's are
    fresh = s.fns[1](x)
    assert _facts(fresh) == _facts(s.fns_direct[1](x)) and fresh._base is None
    assert fresh.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_contiguous_returns_the_argument_itself_or_a_copy(served):
    s = served("def f(x):\n    return x.contiguous()\n")
    x = torch.arange(6.0).view(2, 3)
    assert s.fns[0](x) is x  # as the real .contiguous() on a contiguous tensor
    t = x.t()
    y = s.fns[0](t)
    assert _facts(y) == _facts(s.fns_direct[0](t)) and y.stride() == (2, 1)
    assert y.data_ptr() != x.data_ptr() and y._base is None


def test_in_place_writes_and_layout_changes_reach_the_learners_tensors(served):
    code = ("def double(x):\n    x.mul_(2)\n\ndef swap(x):\n    x.transpose_(0, 1)\n    return x\n\n"
            "def grow(x, y):\n    x.unsqueeze_(0)\n    y[0] = 7\n    return None\n")
    s = served(code, ["double", "swap", "grow"])
    x = torch.arange(6.0).view(2, 3)
    assert s.fns[0](x) is None and x.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    twin = x.clone()
    out = s.fns[1](x)
    s.fns_direct[1](twin)
    assert out is x and _facts(x) == _facts(twin) and x.stride() == (1, 3)
    a, b = torch.zeros(3), torch.zeros(2)
    s.fns[2](a, b)
    assert tuple(a.shape) == (1, 3) and a.stride() in ((3, 1), (1, 1)) and b.tolist() == [7.0, 0.0]


def test_exceptions_come_back_with_their_class_and_message(served):
    code = SPLIT + ("\ndef picky(x, heads):\n    if heads < 1:\n        raise ValueError('heads must be positive')\n"
                    "    return x\n\nclass Odd(Exception):\n    pass\n\ndef odd(x):\n    raise Odd('an odd one')\n")
    s = served(code, ["split_heads", "picky", "odd"])
    x = torch.zeros(2, 3, 8)
    with pytest.raises(RuntimeError) as caught:
        s.fns[0](x, 3)
    with pytest.raises(RuntimeError) as direct:
        s.fns_direct[0](x, 3)
    assert str(caught.value) == str(direct.value) == "shape '[2, 3, 3, 2]' is invalid for input of size 48"
    with pytest.raises(ValueError, match="^heads must be positive$"):
        s.fns[1](x, 0)
    with pytest.raises(RuntimeError, match="^an odd one$") as odd:  # not a builtin: RuntimeError, same words
        s.fns[2](x)
    assert type(odd.value) is RuntimeError
    names = []
    tb = caught.value.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "answer" not in names and "serve" not in names  # none of the server's frames


def test_equal_sizes_dtypes_and_plain_arguments(served):
    code = SPLIT + "\ndef to(x, dtype, size):\n    return x.to(dtype).reshape(size), str(dtype), tuple(size)\n"
    s = served(code, ["split_heads", "to"])
    x = torch.arange(2 * 4 * 16).view(2, 4, 16)  # (B, T, D) with T == H == d_k == 4, int64
    assert _facts(s.fns[0](x, 4)) == _facts(s.fns_direct[0](x, 4))
    for dtype in (torch.float64, torch.int32, torch.bool, torch.bfloat16, torch.float16):
        got = s.fns[1](x, dtype, torch.Size([8, 16]))
        want = s.fns_direct[1](x, dtype, torch.Size([8, 16]))
        assert _facts(got[0]) == _facts(want[0]) and got[1:] == want[1:]


def test_arguments_must_be_plain_and_bounded(served):
    s = served(SPLIT, ["split_heads"])

    class Spy(torch.Tensor):
        pass

    with pytest.raises(TypeError, match="not Spy"):
        s.fns[0](torch.zeros(2, 3, 8).as_subclass(Spy), 4)
    tagged = torch.zeros(2, 3, 8)
    tagged.view = lambda *a: None
    with pytest.raises(TypeError, match="this one has attributes set"):
        s.fns[0](tagged, 4)
    with pytest.raises(TypeError, match="not object"):
        s.fns[0](torch.zeros(2, 3, 8), object())
    with pytest.raises(ValueError, match="takes at most 8 MiB of tensors in one call"):
        s.fns[0](torch.zeros(3 << 20), 4)
    assert s.fns[0](torch.zeros(2, 3, 8), 4).shape == (2, 4, 3, 2)  # still serving


def _frame(header: dict, body: bytes, claimed: int | None = None) -> bytes:
    text = json.dumps(header).encode()
    return b"STF1" + struct.pack(">I", len(text)) + text + struct.pack(">Q", len(body) if claimed is None
                                                                       else claimed) + body


def test_forged_frames_are_refused_and_an_oversized_one_ends_the_server(served):
    s = served(SPLIT, ["split_heads"])
    lie = json.dumps({"k": 0, "args": [], "kwargs": [], "storages": [1 << 40]}).encode()
    os.write(s.request_w, _frame({"kind": "call", "n": 99}, len(lie).to_bytes(4, "big") + lie))
    frame = s.client._next_frame()
    head, _ = remote._unmessage(frame.body)
    assert frame.header == {"kind": "reply", "n": 99}
    assert head == {"error": "ValueError", "message": "a call the implementation refuses: a size that is not a "
                    "bounded whole number", "storages": []}
    bad_index = json.dumps({"k": 5, "args": [], "kwargs": [], "storages": []}).encode()
    os.write(s.request_w, encode({"kind": "call", "n": 100}, len(bad_index).to_bytes(4, "big") + bad_index))
    assert remote._unmessage(s.client._next_frame().body)[0]["error"] == "ValueError"
    assert s.fns[0](torch.zeros(2, 3, 8), 4).shape == (2, 4, 3, 2)  # refused calls leave it serving
    os.write(s.request_w, _frame({"kind": "call", "n": 101}, b"", claimed=1 << 60))
    s.thread.join(5)
    assert s.ended == f"a frame of {1 << 60} bytes (the cap is {10 << 20})"
    for _ in range(2):  # and it stays stopped
        with pytest.raises(RuntimeError, match="^the implementation under test stopped: its process ended before "
                           r"it answered \(out of memory, or it refused what it was sent\)$"):
            s.fns[0](torch.zeros(2, 3, 8), 4)


def test_a_reply_to_an_interrupted_call_is_skipped(served):
    s = served(SPLIT, ["split_heads"])
    x = torch.arange(24.0).view(1, 3, 8)
    s.client.sent += 1  # as if a call had been sent and its caller interrupted (a timeout) before the reply
    enc = remote._Encoder()
    head = {"k": 0, "args": [enc.value(torch.zeros(1, 2, 2)), enc.value(2)], "kwargs": []}
    os.write(s.request_w, encode({"kind": "call", "n": s.client.sent}, remote._message(head, enc.storages.chunks)))
    assert s.fns[0](x, 2).shape == (1, 2, 3, 4)  # the stale reply (shape (1, 2, 2, 1)) was not taken


FORKED = r"""
import os, signal, torch
from shapetrace.exercises import remote
from shapetrace.exercises.sealed import Guard, facades
code = "def f(x):\n    return x + 1\n"
client = remote.start(lambda: (code, ["f"]), lambda: ["a layer that did not take hold"])
print(client.hello())
[f] = facades(client, ["f"], Guard())
print(f(torch.zeros(2)).tolist())
os.kill(client.pid, signal.SIGKILL)
os.waitpid(client.pid, 0)
for _ in range(2):
    try:
        f(torch.zeros(2))
    except RuntimeError as exc:
        print(type(exc).__name__, exc)
"""


def test_a_forked_server_reports_its_layers_and_its_death(torch_zygote):
    # a process of its own (its fork and kill are not pytest's), forked from the zygote: its start is not the point
    done = torch_zygote.run(FORKED, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "['implementation process: a layer that did not take hold']",
        "[1.0, 1.0]",
        "RuntimeError the implementation under test stopped: its process ended before it answered (out of memory, "
        "or it refused what it was sent)",
        "RuntimeError the implementation under test stopped: its process ended before it answered (out of memory, "
        "or it refused what it was sent)",
    ]


def test_writes_before_an_exception_stay_and_the_reply_is_capped(served):
    code = ("def scribble(x):\n    x[0] = 5\n    raise ValueError('wrote, then failed')\n\n"
            "def both(x):\n    x.add_(1)\n    return x * 2\n")
    s = served(code, ["scribble", "both"])
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="^wrote, then failed$"):
        s.fns[0](x)
    assert x.tolist() == [5.0, 0.0, 0.0]  # as the real function leaves it
    big = torch.zeros(5 << 18)  # 5 MiB written in place, and a new 5 MiB result: over one reply's 8 MiB
    with pytest.raises(RuntimeError, match="^the implementation's result and its changes to the arguments are over "
                       "the 8 MiB one call may return$"):
        s.fns[1](big)
    small = torch.zeros(2)
    assert s.fns[1](small).tolist() == [2.0, 2.0] and small.tolist() == [1.0, 1.0]
