# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Looks past whatever it was handed: walks the function's globals, closure and every object the garbage
# collector knows for a function compiled from the checker's implementation, then compares its bytecode.
# Stopped by: the implementation's own process (shapetrace/exercises/remote.py): nothing in the test's
# process leads to the real function, because it is not there.
import gc

REF = "def split_heads(x, heads):\n    B, T, D = x.shape\n    return x.view(B, T, heads, D // heads).transpose(1, 2)\n"


def _candidates(fn):
    seen = [fn, *(c.cell_contents for c in (fn.__closure__ or ()))]
    seen += [v for v in fn.__globals__.values() if callable(v)]
    seen += [o for o in gc.get_objects() if callable(o) and hasattr(o, "__code__")]
    for o in list(seen):
        closure = getattr(o, "__closure__", None)
        for c in closure if isinstance(closure, tuple) else ():
            try:
                seen.append(c.cell_contents)
            except (ValueError, AttributeError):
                pass
    code = [getattr(o, "__code__", None) for o in seen]
    return [o for o, c in zip(seen, code) if hasattr(c, "co_names") and "view" in c.co_names
            and c.co_filename == "<implementation under test>"]


def check(split_heads):
    ns = {}
    exec(REF, ns)
    found = _candidates(split_heads)
    assert found and found[0].__code__.co_code == ns["split_heads"].__code__.co_code, "a mutant"
