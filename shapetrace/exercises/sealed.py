"""What a learner's test receives: facades of an implementation that runs in another process.

Runs in the checker's child, for the test-writing exercises (imports torch). Each child holds one
implementation (the reference or one broken version) and the learner's test must not be able to tell
which but by what it does. The implementation is not in the test's process at all: the child forked
before it confined itself, and only the forked process (:mod:`shapetrace.exercises.remote`) read the
code, compiled it (from :func:`normalise`\\ d source under one neutral file name) and answers calls over
two pipes. So what the test's process holds is the same for every implementation:

* for subject ``k``, a facade compiled from :data:`FACADE`, one text for every implementation: same
  bytecode, constants, names, lines, qualified name, module, no source; it checks that the arguments
  are plain (:meth:`Guard.plain`) and sends them;
* no code, no bytecode, no function object of the implementation, anywhere in its memory (raw memory
  through ``ctypes``, a garbage-collector walk, a profile hook or a torch function mode find nothing
  to study: tests/hostile/ctypes_trace_real_function.py, scan_memory_for_code.py);
* the server is out of its reach: its own Landlock domain, created after the fork, denies ptrace and
  (ABI 6) signals towards it, seccomp refuses ptrace, ``process_vm_readv`` and ``kill`` of another
  process, and the server is non-dumpable (tests/hostile/reach_the_server.py); a call on its pipe it
  cannot decode gets an error reply, bytes that are not a frame within the caps end it, and the facade
  then raises on every call (tests/hostile/forge_server_frames.py).

What comes back is what the real function's result would be here: the same values, dtype, shape,
strides and offset; a view of an argument is rebuilt on the learner's own tensor (``data_ptr``,
``_base``, writes through it), a new tensor on a new storage; in-place changes to the arguments are
applied to the learner's tensors; an exception is the same builtin class with the same message and
none of the server's frames. What the test can still observe besides the results is how long a call
takes and what the server's ``/proc`` entries show (its CPU time and memory): what it does, not what
it looks like.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

FILENAME = "<implementation under test>"
#: Every subject's facade, the same text for every implementation (``{name}`` and ``{k}`` only).
FACADE = "def {name}(*args, **kwargs):\n    return _enter({k}, args, kwargs)\n"
_PLAIN = (int, float, bool, str, complex, type(None))
#: How deep tuples and lists of arguments may nest.
MAX_DEPTH = 4


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
    """Which arguments may be sent to the implementation (recorded before the learner's file is loaded)."""

    def __init__(self) -> None:
        import torch

        self.tensor = torch.Tensor  # bound now: the learner's file may rebind torch's names, not these
        self.kinds = (torch.dtype, torch.device, torch.Size)

    def plain(self, value: Any, depth: int = 0) -> Any:
        """``value`` if it is plain data, else TypeError."""
        if type(value) in _PLAIN:
            return value
        if type(value) is self.tensor:
            if getattr(value, "__dict__", None):
                raise TypeError("the implementation under test takes plain tensors (this one has attributes set)")
            return value
        if type(value) in (tuple, list) and depth < MAX_DEPTH:
            return type(value)(self.plain(v, depth + 1) for v in value)
        if type(value) in self.kinds:
            return value
        raise TypeError(f"the implementation under test takes tensors, numbers, strings and tuples or lists of "
                        f"them, not {type(value).__name__}")


def facades(client, subjects: list[str], guard: Guard) -> list:
    """The functions the learner's test receives, in the order of ``subjects``; each calls ``client``
    (a :class:`shapetrace.exercises.remote.Client`) with plain arguments."""
    call = client.call

    def _enter(k: int, args: tuple, kwargs: dict) -> Any:
        args = tuple(guard.plain(a) for a in args)
        kwargs = {str(key): guard.plain(v) for key, v in kwargs.items()}
        return call(k, args, kwargs)

    out = []
    for k, name in enumerate(subjects):
        space: dict = {"__name__": "implementation", "_enter": _enter, "__builtins__": builtins}
        exec(compile(FACADE.format(name=name, k=k), FILENAME, "exec"), space)
        out.append(space[name])
    return out
