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

* the real code is salted afresh every time it is sealed (:func:`salted`, from the operating system's
  random source): its locals get random names, dead locals holding random constants sit at random
  places, and each top-level function starts with a branch never taken that names every name any
  implementation of the exercise uses (``decoys``, sent by the parent), in a random order. So no
  fingerprint computed beforehand from the package (a function's bytecode, constants, local names, line
  table, or the names it uses, in order or as a set) matches the real code even when raw memory leads a
  test to it (``ctypes.cast`` of the address the facade keeps: tests/hostile/fingerprint_ctypes_address.py).
  Code nested inside a function (a generator expression, a lambda) gets its locals renamed, nothing more.

What this cannot stop: code that reads the process's raw memory (``ctypes``; numpy's
``__array_interface__`` reads any address without it, and torch itself holds ``ctypes`` as
``torch.ctypes``, so refusing the import would stop nothing) can still reach the real function and
study what it does rather than what it looks like: call it under its own torch function mode and list
the ops, or read its instructions (tests/hostile/remaining/, measured in tests/test_sealed.py). Salt
hides what the code looks like, not what it does; closing that needs the implementation in a process
of its own (the learner's test would call it over a pipe); see the README.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import gc
import random
import secrets
import signal
import sys
from collections.abc import Iterable
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


def _top_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def decoy_names(codes: Iterable[str]) -> list[str]:
    """Every name (global, attribute, module) the functions of ``codes`` use: what :func:`salted` makes
    every implementation name, so the names a function uses say nothing about which one it is."""
    names: set[str] = set()
    for code in codes:
        pending = [compile(normalise(code), FILENAME, "exec")]
        while pending:
            co = pending.pop()
            names.update(co.co_names)
            pending += [c for c in co.co_consts if hasattr(c, "co_names")]
    return sorted(names)


class _Namer:
    """Fresh random identifiers, never two alike and never one the code already uses."""

    def __init__(self, rng: random.Random, taken: set[str]):
        self.rng, self.taken = rng, set(taken)

    def __call__(self) -> str:
        while True:
            name = f"_{self.rng.getrandbits(40):010x}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def _bound_elsewhere(fn: ast.FunctionDef) -> set[str]:
    """Names local renaming must leave alone: every parameter (of the function and of any lambda or
    function inside it, so a call by keyword still works) and every ``global``/``nonlocal`` name."""
    keep: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            keep.update(arg.arg for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            keep.update(node.names)
        elif isinstance(node, ast.Import):  # ``import a.b`` binds ``a`` and cannot be renamed as it is
            keep.update(alias.name.split(".")[0] for alias in node.names if alias.asname is None and "." in alias.name)
        elif isinstance(node, ast.ClassDef):  # a class body's names are its attributes
            keep.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            keep.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            keep.add(node.rest)
    return keep


def _rename_locals(fn: ast.FunctionDef, namer: _Namer) -> None:
    """Give every local the function assigns (not a parameter) a random name, everywhere in it."""
    keep = _bound_elsewhere(fn)
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    stored |= {alias.asname or alias.name.split(".")[0] for n in ast.walk(fn)
               if isinstance(n, (ast.Import, ast.ImportFrom)) for alias in n.names if alias.name != "*"}
    stored |= {n.name for n in ast.walk(fn) if isinstance(n, ast.ExceptHandler) and n.name}
    new = {name: namer() for name in sorted(stored - keep)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in new:
            node.id = new[node.id]
        elif isinstance(node, ast.ExceptHandler) and node.name in new:
            node.name = new[node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound in new and alias.name != "*":
                    alias.asname = new[bound]


def _assign(name: str, value: int) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(name, ast.Store())], value=ast.Constant(value))


def _mention(flag: str, name: str, namer: _Namer) -> ast.stmt:
    """A statement that puts ``name`` among the function's names (a module path is imported, never run)."""
    if "." in name:
        return ast.Import(names=[ast.alias(name=name, asname=namer())])
    return ast.Expr(ast.Attribute(ast.Name(flag, ast.Load()), name, ast.Load()))


def _salt_function(fn: ast.FunctionDef, rng: random.Random, namer: _Namer, decoys: list[str]) -> None:
    _rename_locals(fn, namer)
    body = list(fn.body)
    for _ in range(rng.randint(1, 3)):  # dead locals with random constants, before the last statement
        body.insert(rng.randint(0, len(body) - 1), _assign(namer(), rng.getrandbits(62) + 1))
    if decoys:
        flag = namer()
        names = list(decoys)
        rng.shuffle(names)
        never = ast.If(test=ast.Compare(ast.Name(flag, ast.Load()), [ast.Lt()], [ast.Constant(0)]),
                       body=[_mention(flag, n, namer) for n in names], orelse=[])
        body[:0] = [_assign(flag, rng.getrandbits(62) + 1), never]  # first, so the names' order is this one
    fn.body = body


def salted(code: str, rng: random.Random | None = None, decoys: Iterable[str] = ()) -> str:
    """``code`` normalised, then salted in every top-level function (see the module's docstring): what it
    does is unchanged; what it looks like is new each time (``rng``: the operating system's by default)."""
    rng = rng or secrets.SystemRandom()
    tree = ast.parse(normalise(code))
    namer = _Namer(rng, {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(decoys))
    for fn in _top_functions(tree):
        _salt_function(fn, rng, namer, list(decoys))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


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


def seal(code: str, subjects: list[str], guard: Guard, decoys: Iterable[str] = (),
         rng: random.Random | None = None) -> list:
    """The facades of one implementation's ``subjects``, in order (see the module's docstring); the real
    code is :func:`salted` afresh (``rng``: the operating system's random source unless a test gives one)."""
    namespace: dict = {"__name__": "implementation", "__builtins__": builtins}
    exec(compile(salted(code, rng, decoys), FILENAME, "exec"), namespace)
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
