"""The implementation a learner's test receives, sealed: every implementation looks the same but for what it does.

Runs in the checker's child (imports torch), for the test-writing exercises. Each child holds one
implementation (the reference or one broken version) and must not be able to tell which. A test that
recognised a broken version by its code (``__code__.co_code``, its constants, names, line numbers,
source, qualified name) could fail it without checking anything. So:

* the implementation is compiled from normalised source (parsed and unparsed: no comments, no
  docstrings) under one neutral file name, and its functions are never handed out;
* the test receives, for subject ``k``, a function compiled from the same text for every
  implementation (:data:`FACADE`): same bytecode, constants, names, lines, qualified name, module,
  defaults and no source, whichever implementation stands behind it;
* the real functions are reachable from no Python object: they are kept alive by their reference
  count alone, taken off the garbage collector's lists, and found by address (no closure, no global,
  nothing ``gc.get_objects``, ``gc.get_referents`` or ``__globals__`` lead to);
* while one runs, nothing of the learner's can run and look at its frame: profile and trace hooks,
  signal handlers, the garbage collector and its callbacks wait; torch function modes and tensor
  subclasses are off; arguments must be plain tensors (no attributes of their own), numbers, strings,
  ``None`` or tuples and lists of them; torch and builtins must be as they were before the learner's
  file ran, and no other thread may exist; an exception comes back without the frames it passed
  through.

What this cannot stop: code that reads the process's raw memory (``ctypes``) can still find the bytes
of the real code. Closing that needs the implementation in another process; see the README.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import gc
import signal
import sys
from typing import Any

FILENAME = "<implementation under test>"
#: Every subject's facade, the same text for every implementation (``{name}`` and ``{k}`` only).
FACADE = "def {name}(*args, **kwargs):\n    return _enter({k}, args, kwargs)\n"
_PLAIN = (int, float, bool, str, complex, type(None))

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_untrack = ctypes.pythonapi.PyObject_GC_UnTrack
_untrack.argtypes = [ctypes.c_void_p]


def normalise(code: str) -> str:
    """The implementation's source, parsed and unparsed: no comments, no docstrings, one layout."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"


class Guard:
    """What must hold while a real implementation runs (recorded before the learner's file is loaded)."""

    def __init__(self) -> None:
        import torch
        import torch.nn.functional as F

        self.torch = torch
        #: Namespaces whose every name must be as recorded: a new name there overrides an inherited method.
        self.closed = [torch.Tensor.__dict__, torch.Size.__dict__, builtins.__dict__]
        #: Namespaces whose recorded names must be as recorded (torch adds submodules there lazily).
        self.open = [torch.__dict__, F.__dict__]
        self.saved = [dict(space) for space in self.closed + self.open]

    def changed(self) -> str:
        """Why the implementation must not run now ('' when it may)."""
        for i, (space, saved) in enumerate(zip(self.closed + self.open, self.saved)):
            if (i < len(self.closed) and len(space) != len(saved)) or \
                    any(space.get(k, saved) is not v for k, v in saved.items()):
                return "torch or Python's builtins were changed by the file under test"
        if len(sys._current_frames()) != 1:
            return "the file under test started a thread"
        return ""

    def plain(self, value: Any, depth: int = 0) -> Any:
        """``value`` if it is plain data, else TypeError (nothing of the learner's may run inside)."""
        if type(value) in _PLAIN:
            return value
        if type(value) is self.torch.Tensor:
            if getattr(value, "__dict__", None):
                raise TypeError("the implementation under test takes plain tensors (this one has attributes set)")
            return value
        if type(value) in (tuple, list) and depth < 4:
            return type(value)(self.plain(v, depth + 1) for v in value)
        if type(value) in (self.torch.dtype, self.torch.device, self.torch.Size):
            return value
        raise TypeError(f"the implementation under test takes tensors, numbers, strings and tuples or lists of "
                        f"them, not {type(value).__name__}")


def _hide(fn) -> int:
    """Keep ``fn`` alive by its reference count alone, off the collector's lists; its address."""
    _incref(fn)
    if gc.is_tracked(fn):
        _untrack(id(fn))
    return id(fn)


def _run(address: int, args: tuple, kwargs: dict) -> Any:
    fn = ctypes.cast(address, ctypes.py_object).value
    return fn(*args, **kwargs)


class _Quiet:
    """Nothing of the learner's runs while the real code does: no profile or trace hook, no signal
    handler (signals wait), no garbage collection (no finalizer, no ``gc.callbacks``)."""

    def __enter__(self) -> None:
        self.hooks = sys.getprofile(), sys.gettrace()
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        self.gc, self.callbacks = gc.isenabled(), list(gc.callbacks)
        sys.setprofile(None)
        sys.settrace(None)
        gc.disable()
        gc.callbacks.clear()

    def __exit__(self, *exc) -> None:
        gc.callbacks[:] = self.callbacks
        if self.gc:
            gc.enable()
        sys.setprofile(self.hooks[0])
        sys.settrace(self.hooks[1])
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


def seal(code: str, subjects: list[str], guard: Guard) -> list:
    """The facades of one implementation's ``subjects``, in order (see the module's docstring)."""
    namespace: dict = {"__name__": "implementation", "__builtins__": builtins}
    exec(compile(normalise(code), FILENAME, "exec"), namespace)
    addresses = [_hide(namespace[name]) for name in subjects]
    torch = guard.torch

    def _enter(k: int, args: tuple, kwargs: dict) -> Any:
        why = guard.changed()
        if why:
            raise RuntimeError(f"the implementation under test refuses to run: {why}")
        args = tuple(guard.plain(a) for a in args)
        kwargs = {str(key): guard.plain(v) for key, v in kwargs.items()}
        failed, quiet = None, _Quiet()
        try:
            with quiet, torch._C.DisableTorchFunction():
                return _run(addresses[k], args, kwargs)
        except BaseException as exc:  # noqa: B036  (re-raised below, without the frames it came through)
            failed = exc
        failed.__context__ = failed.__cause__ = None
        raise failed.with_traceback(None)

    facades = []
    for k, name in enumerate(subjects):
        space: dict = {"__name__": "implementation", "_enter": _enter, "__builtins__": builtins}
        exec(compile(FACADE.format(name=name, k=k), FILENAME, "exec"), space)
        facades.append(space[name])
        namespace[name] = space[name]  # a subject calling another goes through its facade too
    return facades
