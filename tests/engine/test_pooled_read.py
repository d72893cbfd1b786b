"""Where the pooled contract was not measured (engine/pooled_read.py): a causal model's pooled output whose token
is picked from a mask among its arguments is ``?`` with why, never ``✓`` (the Python API without
``dependencies=True``, as tests/corpus/helpers.round_outcome traces; the CLI measures it). The model and its
masks are tests/engine/test_pooled.py's."""

from __future__ import annotations

from tests.engine.test_pooled import _right_padded, _traced

UNMEASURED_NOTE = "which token a causal model's pooled output reads was not measured on the values"


def test_a_pool_whose_token_was_not_measured_is_never_all_clear():
    """The same first-token pool through the Python API without the dependency contracts (as
    tests/corpus/helpers.round_outcome traces) was ``✓`` on eefe532 while the CLI said ``✗``: the verdict
    depended on the entry point. Now a ``pooled-read-unmeasured`` note and ``?`` with why, on both picks;
    where the contract was measured (a mask proves entry 0 whole) no note; without a mask among the arguments
    (CLIP's pool at the largest id), no index counted on a mask and no note."""
    for pick in ("first", "last"):
        t = _traced(pick, _right_padded(), dependencies=False)
        notes = [d for d in t.diagnostics if d.kind == "pooled-read-unmeasured"]
        assert [d.severity for d in notes] == ["note"]
        assert notes[0].message.startswith("not measured on the values: which token the pooled output reads. The "
                                           "code declares a causal mask (tril #")
        verdict = t.report().verdict
        assert verdict.mark == "?" and UNMEASURED_NOTE in verdict.unproven
    measured = _traced("last", _right_padded())
    assert "pooled-read-unmeasured" not in [d.kind for d in measured.diagnostics]
    assert "pooled-read-unmeasured" not in [d.kind for d in _traced("argmax", None, dependencies=False).diagnostics]
