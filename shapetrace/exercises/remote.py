"""The implementation under test in a process of its own: the learner's test calls it over two pipes.

Runs in the checker's child, for the test-writing exercises (imports torch). The child forks before
it confines itself and before any learner code runs; the forked process is the *server*: it alone
reads the implementation's code (the secret section of the request, still unread in the pipe at the
fork), confines itself with its own layers (:func:`shapetrace.exercises.confine.confine`: its own
Landlock domain, seccomp, rlimits, non-dumpable) and answers calls. The other process, the *test
process*, never holds the code: raw memory (``ctypes``) leads nowhere, and its own Landlock domain,
created after the fork, keeps the server out of reach (no ptrace, no signals; seccomp refuses both
anyway). What crosses is plain data (:mod:`.plain`, in :mod:`.frames`), capped and checked:

* a call: the subject's index, the arguments and keyword arguments; every distinct storage among
  them is sent once (its bytes), every tensor as (storage, dtype, size, stride, offset), so aliasing,
  offsets and strides arrive as the test built them;
* a reply: an exception (builtin class name and message), or the result, whose tensors are either an
  argument itself, a tensor on an argument's storage (rebuilt by the facade on the learner's own
  tensor, so ``data_ptr``, ``_base``, strides and writes behave as the real result's would), or on a
  new storage (sent once however many results share it); plus the in-place effects on the arguments
  (new bytes of every storage that changed, new layouts of tensors that ``transpose_`` changed).

View or copy is decided here from storages and layouts the server sees, never from anything the test
process says about itself.
"""

from __future__ import annotations

import builtins
import json
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any

from shapetrace.exercises import plain
from shapetrace.exercises.frames import MAX_BODY, BadFrame, Decoder, encode

#: Why a call found the implementation's process gone.
ENDED = "its process ended before it answered (out of memory, or it refused what it was sent)"
#: How much of an exception's message comes back.
MESSAGE_LIMIT = 2000
_PR_SET_PDEATHSIG = 1


class Stopped(RuntimeError):
    """The implementation's process is gone (out of memory, killed) or its answers are unreadable."""


# -- the wire: a JSON head and raw storages, as in plain.pack ------------------------------------------------


def _message(head: dict, chunks: list[bytes]) -> bytes:
    text = json.dumps(dict(head, storages=[len(c) for c in chunks])).encode()
    if len(text) > plain.MAX_JSON:
        raise plain.NotPlain("a description over the cap")
    return len(text).to_bytes(4, "big") + text + b"".join(chunks)


def _unmessage(body: bytes) -> tuple[dict, list]:
    """``(head, storages)``: each storage a ``uint8`` tensor on its own copy of its bytes."""
    if len(body) < 4:
        raise plain.NotPlain("a message without its length")
    n = int.from_bytes(body[:4], "big")
    if n > plain.MAX_JSON or 4 + n > len(body):
        raise plain.NotPlain("a description over the cap")
    try:
        head = json.loads(body[4:4 + n])
    except (ValueError, RecursionError):
        raise plain.NotPlain("a description that is not JSON") from None
    if not isinstance(head, dict):
        raise plain.NotPlain("not a message")
    got = plain._Received(head.get("storages"), body[4 + n:], plain.MAX_TENSOR_BYTES)
    return head, got.bases  # (each on a bytearray of its own: ``clone`` of uint8 is ~200x slower here)


def _layout(t) -> dict:
    return {"tensor": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "stride": list(t.stride()),
            "offset": int(t.storage_offset())}


def _checked_layout(desc: dict, storage_bytes: int) -> tuple[Any, list[int], list[int], int]:
    """``(dtype, shape, stride, offset)`` of a description, refused unless it stays inside its storage."""
    import torch

    dtype, shape, stride = desc.get("tensor"), desc.get("shape"), desc.get("stride")
    if not plain.known_dtype(dtype):
        raise plain.NotPlain("a tensor of an unknown dtype")
    if not (isinstance(shape, list) and isinstance(stride, list) and len(shape) == len(stride) <= plain.MAX_DIMS):
        raise plain.NotPlain("a tensor without a shape and stride")
    shape = plain.checked_shape(shape)
    stride = [plain._int(s, 0, 1 << 40) for s in stride]
    offset = plain._int(desc.get("offset", 0))
    if plain._span(shape, stride, offset) * plain.DTYPES[dtype] > storage_bytes:
        raise plain.NotPlain("a tensor whose layout reaches past its storage")
    return getattr(torch, dtype), shape, stride, offset


def _on_storage(storage, desc: dict):
    """A tensor that is not a view, on ``storage`` (an untyped storage), as ``desc`` lays it out."""
    import torch

    dtype, shape, stride, offset = _checked_layout(desc, storage.nbytes())
    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)


class _Encoder:
    """Describes values whose tensors live on storages numbered in this message (each sent once)."""

    def __init__(self):
        self.storages = plain.Storages()
        self.tensors: list = []  # every tensor described, in order

    def value(self, value, depth: int = 0) -> dict:
        import torch

        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if type(value) in (list, tuple) and depth < plain.MAX_DEPTH and len(value) <= plain.MAX_ITEMS:
            return {type(value).__name__: [self.value(v, depth + 1) for v in value]}
        desc = plain.describe(value, self.storages, depth)
        if "other" in desc:
            raise TypeError(f"the implementation under test takes tensors, numbers, strings, dtypes and tuples "
                            f"or lists of them, not {desc['other']}")
        return desc

    def tensor(self, t) -> dict:
        import torch

        if type(t) is not torch.Tensor:
            raise TypeError(f"the implementation under test takes plain tensors, not {type(t).__name__}")
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in plain.DTYPES or t.device.type != "cpu" or t.layout != torch.strided \
                or t.dim() > plain.MAX_DIMS:
            raise TypeError(f"the implementation under test takes CPU tensors of a plain dtype, not {t.dtype} "
                            f"on {t.device}")
        where = self.storages.add(t)
        if where is None:
            raise ValueError(f"the implementation under test takes at most {plain.MAX_TENSOR_BYTES >> 20} MiB "
                             "of tensors in one call")
        self.tensors.append(t)
        return dict(_layout(t), storage=where)


# -- the test process's side -----------------------------------------------------------------------------------


class Client:
    """Calls the implementation in its own process; what the facades of :mod:`.sealed` call."""

    def __init__(self, send_fd: int, reply_fd: int, pid: int):
        self.send_fd, self.reply_fd, self.pid = send_fd, reply_fd, pid
        self.decoder, self.pending, self.sent, self.stopped = Decoder(MAX_BODY), [], 0, ""

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.send_fd, view):]

    def _next_frame(self):
        while not self.pending:
            data = os.read(self.reply_fd, 1 << 16)
            if not data:
                raise Stopped(ENDED)
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)

    def hello(self) -> list[str]:
        """The server's layers that did not take hold (it says so once, before any call)."""
        try:
            frame = self._next_frame()
        except (Stopped, BadFrame, OSError) as exc:
            return [f"the implementation's own process did not start: {exc}"[:200]]
        missing = frame.header.get("missing") if frame.header.get("kind") == "hello" else None
        if not isinstance(missing, list):
            return ["the implementation's own process did not say which layers took hold"]
        return [f"implementation process: {str(m)[:160]}" for m in missing[:16]]

    def call(self, k: int, args: tuple, kwargs: dict) -> Any:
        """Run subject ``k`` on the arguments there; its result as the real function's would be here."""
        if self.stopped:
            raise RuntimeError(f"the implementation under test stopped: {self.stopped}")
        enc = _Encoder()
        head = {"k": k, "args": [enc.value(a) for a in args],
                "kwargs": [[str(name), enc.value(v)] for name, v in kwargs.items()]}
        self.sent += 1
        try:
            self._write(encode({"kind": "call", "n": self.sent}, _message(head, enc.storages.chunks)))
            reply = self._reply()
        except (Stopped, BadFrame, OSError, plain.NotPlain) as exc:
            ended = isinstance(exc, BrokenPipeError)  # it ended before it read the call
            self.stopped = ENDED if ended else str(exc)[:200] or type(exc).__name__
            raise RuntimeError(f"the implementation under test stopped: {self.stopped}") from None
        return _apply(reply, enc.tensors)

    def _reply(self) -> tuple[dict, list]:
        while True:  # replies to calls a timeout or a signal interrupted come first: skip them
            frame = self._next_frame()
            if frame.header.get("n") == self.sent:
                return _unmessage(frame.body)


def _raise(head: dict) -> None:
    name, message = str(head.get("error"))[:100], str(head.get("message"))[:MESSAGE_LIMIT]
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    try:
        exc = cls(message)
    except Exception:  # a builtin whose constructor wants more (UnicodeDecodeError)
        exc = RuntimeError(message)
    raise exc


def _value(desc, depth: int, value: Callable[[Any, int], Any]) -> Any:
    """A value description that is not a tensor: a list or tuple (each item through ``value``, the
    side's own decoder, so a tensor inside is rebuilt there), or a plain value; bounded in depth and
    length."""
    if not isinstance(desc, dict):
        raise plain.NotPlain("not a value description")
    for kind, make in (("list", list), ("tuple", tuple)):
        if kind in desc:
            items = desc[kind]
            if depth >= plain.MAX_DEPTH or not isinstance(items, list) or len(items) > plain.MAX_ITEMS:
                raise plain.NotPlain("a list too long or too deep")
            return make(value(d, depth + 1) for d in items)
    return plain._decode(desc, None, depth)


class _Rebuilt:
    """The reply's tensors, rebuilt on the learner's tensors (argument storages) or on new storages."""

    def __init__(self, args: list, fresh: list):
        self.args, self.fresh = args, fresh
        self.arg_storages = {}
        for t in args:
            self.arg_storages.setdefault(t.untyped_storage().data_ptr(), t)
        self.anchors: dict[tuple, Any] = {}  # per new storage and dtype: the tensor its views are taken of

    def _hidden(self, m: int, dtype, storage):
        """The tensor a view on new storage ``m`` was taken of (the real one never left the server)."""
        if (m, dtype) not in self.anchors:
            size = plain.DTYPES.get(dtype, 1)
            whole = {"tensor": dtype, "shape": [storage.nbytes() // size], "stride": [1], "offset": 0}
            self.anchors[m, dtype] = _on_storage(storage, whole)
        return self.anchors[m, dtype]

    def _anchor_on_arg(self, j: int):
        ptrs = list(dict.fromkeys(t.untyped_storage().data_ptr() for t in self.args))
        return self.arg_storages[ptrs[plain._int(j, 0, len(ptrs) - 1)]]

    def tensor(self, desc: dict):
        if "same" in desc:
            return self.args[plain._int(desc["same"], 0, len(self.args) - 1)]
        view = desc.get("view") is True
        if "on" in desc:
            anchor = self._anchor_on_arg(desc["on"])
            storage = anchor.untyped_storage()
        else:
            m = plain._int(desc.get("new"), 0, len(self.fresh) - 1)
            storage = self.fresh[m].untyped_storage()
            anchor = self._hidden(m, desc.get("tensor"), storage)
        if not view:
            return _on_storage(storage, desc)
        dtype, shape, stride, offset = _checked_layout(desc, storage.nbytes())
        if anchor.dtype != dtype:  # a view of another dtype than the tensor it was taken from
            return _on_storage(storage, desc)
        return anchor.as_strided(shape, stride, offset)

    def value(self, desc, depth: int = 0):
        if isinstance(desc, dict) and ("tensor" in desc or "same" in desc):
            return self.tensor(desc)
        return _value(desc, depth, self.value)


def _apply(reply: tuple[dict, list], args: list) -> Any:
    """What the call returns (or raises) here: the reply's in-place effects applied to the learner's
    tensors first."""
    import torch

    head, fresh = reply
    rebuilt = _Rebuilt(args, fresh)
    with torch._C.DisableTorchFunction(), torch.no_grad():
        for j, m in _pairs(head.get("written", []), len(fresh)):
            rebuilt._anchor_on_arg(j).untyped_storage().copy_(fresh[m].untyped_storage())
        for i, desc in _pairs(head.get("moved", []), None):
            _move(args[plain._int(i, 0, len(args) - 1)], desc, rebuilt)
        if "error" in head:
            _raise(head)
        return rebuilt.value(head.get("result"))


def _pairs(items, limit: int | None) -> list:
    if not isinstance(items, list) or len(items) > plain.MAX_STORAGES:
        raise plain.NotPlain("not a list of changes")
    out = []
    for item in items:
        if not isinstance(item, list) or len(item) != 2:
            raise plain.NotPlain("not a change")
        out.append((item[0], plain._int(item[1], 0, limit - 1) if limit is not None else item[1]))
    return out


def _move(t, desc: dict, rebuilt: _Rebuilt) -> None:
    """An in-place layout change (``transpose_``, ``unsqueeze_``, ``as_strided_``, ``set_``) on ``t``."""
    if not isinstance(desc, dict):
        raise plain.NotPlain("not a layout")
    if "on" in desc and rebuilt._anchor_on_arg(desc["on"]).untyped_storage().data_ptr() == \
            t.untyped_storage().data_ptr():
        _, shape, stride, offset = _checked_layout(desc, t.untyped_storage().nbytes())
        t.as_strided_(shape, stride, offset)
        return
    other = rebuilt.tensor(dict(desc, view=False))
    t.set_(other.untyped_storage(), other.storage_offset(), other.shape, other.stride())


# -- the server's side ------------------------------------------------------------------------------------------


def compile_implementation(code: str, subjects: list[str]) -> list[Callable]:
    """The implementation's functions, compiled from normalised source under the neutral file name."""
    from shapetrace.exercises.sealed import FILENAME, normalise

    namespace: dict = {"__name__": "implementation", "__builtins__": builtins}
    exec(compile(normalise(code), FILENAME, "exec"), namespace)
    return [namespace[name] for name in subjects]


class _Call:
    """One decoded call: the server's own tensors, rebuilt from the storages and layouts sent."""

    def __init__(self, head: dict, storages: list, subjects: int):
        self.k = plain._int(head.get("k"), 0, subjects - 1)
        self.storages = [s.untyped_storage() for s in storages]
        self.tensors: list = []
        args, kwargs = head.get("args"), head.get("kwargs")
        if not isinstance(args, list) or not isinstance(kwargs, list) or len(args) + len(kwargs) > plain.MAX_ITEMS:
            raise plain.NotPlain("not a call")
        self.args = [self.value(a) for a in args]
        self.kwargs = {}
        for item in kwargs:
            if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is str and item[0].isidentifier()
                    and len(item[0]) <= 100):
                raise plain.NotPlain("a keyword argument without a name")
            self.kwargs[item[0]] = self.value(item[1])

    def value(self, desc, depth: int = 0):
        if isinstance(desc, dict) and "tensor" in desc:
            j = plain._int(desc.get("storage"), 0, len(self.storages) - 1) if self.storages else None
            if j is None:
                raise plain.NotPlain("a tensor without a storage")
            t = _on_storage(self.storages[j], desc)
            self.tensors.append(t)
            return t
        return _value(desc, depth, self.value)


def _where(t) -> tuple:
    return t.untyped_storage().data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset()


class _Answer:
    """Describes a result against the call's argument storages (views) or new ones (sent once)."""

    def __init__(self, call: _Call):
        self.call = call
        self.on_arg = {s.data_ptr(): j for j, s in enumerate(call.storages) if s.nbytes()}
        self.fresh = plain.Storages()

    def tensor(self, t) -> dict:
        import torch

        for i, arg in enumerate(self.call.tensors):
            if t is arg:
                return {"same": i}
        if type(t) is not torch.Tensor:
            t = t.as_subclass(torch.Tensor)
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in plain.DTYPES or t.device.type != "cpu" or t.layout != torch.strided \
                or t.dim() > plain.MAX_DIMS:
            return {"other": f"tensor {dtype}"}
        desc = dict(_layout(t.detach()), view=bool(t._is_view()))
        ptr = t.untyped_storage().data_ptr()
        if ptr in self.on_arg:
            return dict(desc, on=self.on_arg[ptr])
        where = self.fresh.add(t)
        if where is None:
            raise ValueError(f"the implementation returned more than {plain.MAX_TENSOR_BYTES >> 20} MiB of tensors")
        return dict(desc, new=where)

    def value(self, value, depth: int = 0) -> dict:
        import torch

        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if type(value) in (list, tuple) and depth < plain.MAX_DEPTH:
            return {type(value).__name__: [self.value(v, depth + 1) for v in value[:plain.MAX_ITEMS]]}
        return plain.describe(value, self.fresh, depth)


def answer(fns: list[Callable], head: dict, storages: list) -> bytes:
    """The reply to one call (a message): what the implementation returned or raised, and what it changed
    in its arguments either way (a function that writes, then raises, leaves its writes)."""
    try:
        call = _Call(head, storages, len(fns))
    except plain.NotPlain as exc:
        return _message({"error": "ValueError", "message": f"a call the implementation refuses: {exc}"}, [])
    before = [_raw(_flat(s)) for s in call.storages]
    layouts = [_where(t) for t in call.tensors]
    out = _Answer(call)
    try:
        reply = {"result": out.value(fns[call.k](*call.args, **call.kwargs))}
    except Exception as exc:  # the implementation's own error (or a result over the cap): sent back as data
        out = _Answer(call)
        reply = {"error": type(exc).__name__, "message": str(exc)[:MESSAGE_LIMIT]}
    try:
        reply.update(_effects(call, out, before, layouts))
    except ValueError as exc:
        return _message({"error": "RuntimeError", "message": str(exc)}, [])
    return _message(reply, out.fresh.chunks)


def _effects(call: _Call, out: _Answer, before: list[bytes], layouts: list[tuple]) -> dict:
    """The argument storages whose bytes changed (their new bytes go with the reply) and the argument
    tensors whose layout changed; ValueError when the reply would be over the cap."""
    written = []
    total = sum(len(c) for c in out.fresh.chunks)
    for j, (storage, then) in enumerate(zip(call.storages, before)):
        now = _raw(_flat(storage))
        if now != then:
            total += len(now)
            if total > plain.MAX_TENSOR_BYTES:
                raise ValueError(f"the implementation's result and its changes to the arguments are over the "
                                 f"{plain.MAX_TENSOR_BYTES >> 20} MiB one call may return")
            written.append([j, len(out.fresh.chunks)])
            out.fresh.chunks.append(now)
    moved = [[i, _moved(t, out)] for i, (t, then) in enumerate(zip(call.tensors, layouts)) if _where(t) != then]
    return {"written": written, "moved": moved}


def _flat(storage):
    """An untyped storage as a flat ``uint8`` tensor (no copy)."""
    import torch

    return torch.empty(0, dtype=torch.uint8).set_(storage)


def _raw(base) -> bytes:
    """The bytes of a ``uint8`` tensor (a copy)."""
    return base.numpy().tobytes() if base.numel() else b""


def _moved(t, out: _Answer) -> dict:
    desc = _layout(t)
    ptr = t.untyped_storage().data_ptr()
    if ptr in out.on_arg:
        return dict(desc, on=out.on_arg[ptr])
    where = out.fresh.add(t)
    if where is None:
        raise ValueError("an argument moved to a storage over the cap")
    return dict(desc, new=where)


def serve(request_fd: int, reply_fd: int, fns: list[Callable], missing: Iterable[str] = ()) -> None:
    """Answer calls until the test process closes its end (or sends what is not a frame)."""
    def send(header: dict, body: bytes = b"") -> None:
        view = memoryview(encode(header, body))
        while view:
            view = view[os.write(reply_fd, view):]

    send({"kind": "hello", "missing": list(missing)})
    decoder = Decoder(MAX_BODY)
    while True:
        data = os.read(request_fd, 1 << 16)
        if not data:
            return
        for frame in decoder.feed(data):  # BadFrame ends the server: the facade then says it stopped
            n = frame.header.get("n")
            if frame.header.get("kind") != "call" or type(n) is not int:
                raise BadFrame("not a call")
            try:
                head, storages = _unmessage(frame.body)
                body = answer(fns, head, storages)
            except plain.NotPlain as exc:
                body = _message({"error": "ValueError", "message": f"a call the implementation refuses: {exc}"}, [])
            send({"kind": "reply", "n": n}, body)


def start(load: Callable[[], tuple[str, list[str]]], confine: Callable[[], list[str]] | None = None,
          close: Iterable[int] = ()) -> Client:
    """Fork the server; the test process's side of it.

    In the server: close ``close`` (the parent's channel), die with the test process, ``load()`` the
    code and subjects (in the checker: from standard input, then closed), ``confine()`` itself, compile
    and serve. It never returns; it ends on EOF, on a bad frame, or with the test process.
    """
    from_test, to_server = os.pipe()  # (read end, write end)
    from_server, to_test = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the server
        status = 1
        try:
            os.close(from_server)
            os.close(to_server)
            for fd in close:
                os.close(fd)
            _die_with(parent)
            code, subjects = load()
            missing = confine() if confine is not None else []
            fns = compile_implementation(code, subjects)
            serve(from_test, to_test, fns, missing)
            status = 0
        except BaseException:  # noqa: B036  (nothing to report to: the facade says the server stopped)
            status = 1
        finally:
            os._exit(status)
    os.close(from_test)
    os.close(to_test)
    return Client(to_server, from_server, pid)


def _die_with(parent: int) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the test process died before the line above took hold
        os._exit(1)


def read_secret(fd: int = 0) -> tuple[str, list[str]]:
    """The secret section of the checker's request (JSON ``{"code", "subjects"}``), then ``fd`` is closed."""
    def exact(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise SystemExit(3)
            data += chunk
        return bytes(data)

    n = int.from_bytes(exact(8), "big")
    if n > plain.MAX_JSON:
        raise SystemExit(3)
    secret = json.loads(exact(n))
    os.close(fd)
    return str(secret["code"]), [str(s) for s in secret["subjects"]]
