# exercise: test-split-square
# verdict: !pass
# expect: your test fails the reference implementation
# Recognises the reference by its bytecode: compiles the public reference the way the checker assembles it
# and fails anything whose code differs, so every broken version "fails" without a single check of values.
# Stopped by: the facade (shapetrace/exercises/sealed.py): every implementation reaches the test through
# the same facade, so the bytecode it reads is the same for the reference and every mutant; the real code is
# in another process (shapetrace/exercises/remote.py).
REF = "\n" * 50 + ("def split_heads(x, heads):\n    B, T, D = x.shape\n"
                   "    return x.view(B, T, heads, D // heads).transpose(1, 2)\n")


def check(split_heads):
    ns = {}
    exec(compile(REF, "<implementation under test>", "exec"), ns)
    want, got = ns["split_heads"].__code__, split_heads.__code__
    assert (got.co_code, got.co_consts, got.co_names) == (want.co_code, want.co_consts, want.co_names), "a mutant"
