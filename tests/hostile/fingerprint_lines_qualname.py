# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Recognises the reference without its bytecode: source (where inspect can get it), qualified name, first
# line, the whole line table, constants and variable names, compared with the public reference compiled at
# the line the checker puts it on.
# Stopped by: the facade: compiled from one text for every implementation (same name, file, lines,
# constants); the real function is in another process (shapetrace/exercises/remote.py).
import inspect

REF = "\n" * 50 + ("def split_heads(x, heads):\n    B, T, D = x.shape\n"
                   "    return x.view(B, T, heads, D // heads).transpose(1, 2)\n")


def _looks(fn):
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = None
    co = fn.__code__
    return (source, fn.__qualname__, co.co_firstlineno, list(co.co_lines()), co.co_consts, co.co_varnames)


def check(split_heads):
    ns = {}
    exec(compile(REF, "<implementation under test>", "exec"), ns)
    assert _looks(split_heads) == _looks(ns["split_heads"]), "a mutant"
