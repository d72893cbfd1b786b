"""A fiftieth round of public-style files (tests/corpus/public50: Mixture-of-Depths routing as
0-5788719150923125/praxis ``PraxisMixtureOfDepths`` routes it, a ``topk`` over router scores picking the tokens a
causal block runs on, ``sort`` putting them back in sequence order, ``gather`` and ``torch.scatter`` taking them out
and writing them back), traced at distinct sizes and at equal sizes, first sight recorded before any fix (on
243f502 + the file).

``round_outcome`` (distinct | equal sizes) and the CLI (``cd /tmp && shapetrace trace FILE [bug] --dims DIMS``, at
the first DIMS, run on 243f502: the same marks as the distinct column):

================= ================= ================================== ============================ ============
file              variant           distinct (first sight)             equal (first sight)          after fixes
================= ================= ================================== ============================ ============
mod_router_gather (correct)         ✗ causal-mask-leaks (CLI; engine ?) ?                           ? | ?
mod_router_gather indices-unsorted  ✗ causal-mask-leaks (CLI; engine ?) ?                           ? | ? (CLI ✗)
================= ================= ================================== ============================ ============

At first sight the correct file got a false ``✗``: the dependency contracts move the last token, its router score
moves with it, and ``topk`` picks other tokens, so every output it picks or skips changes; the causal contract read
that as the mask leaking. Whether a token is picked does depend on later tokens (expert-choice routing is not
causal, as the Mixture-of-Depths paper says of sampling), but no data flows backwards through the block.

The fixes (tests/engine/test_picks.py; each test fails on 243f502):

* engine/picks, engine/dependencies ``_picks_checked``: a token contract that broke is measured once more with the
  picks made by value held (the integer or boolean results of calls on floats: ``topk``'s indices, ``argmax``,
  ``x > 0``), each pick's values read again at the held positions. Where a pick changed, the token contracts are
  read on that run: the correct file's causal mask holds (said with the picks held), the unsorted picks still leak
  (a causal mask over tokens in the order of their scores), and the finding says how picks leak.
* engine/op_table: ``torch.scatter`` and ``index_copy`` (out of place) keep their input's names (the adding ones,
  ``index_add`` and ``scatter_add``, stay unnamed: named, the GAT files of tests/corpus/headsmean got a false
  ``reduction-over-wrong-axis``). ``topk``'s and ``sort``'s picks stay unnamed: named ``T[topk]``, this file went
  ``✓``, and so did two value-level bugs of earlier rounds (public22 point_transformer's farthest neighbours,
  public41 biformer_bra's region grid read column-major), which no name decides. So ``gather #1`` and
  ``expand #2`` stay unchecked here.

Why each stays ``?``: the picks (``topk``'s indices, and the ``gather`` and ``expand`` made from them) are unnamed;
at equal sizes (B = T = H = 4) the input ``[4, 4, 32]`` reads ``[B, T, D]`` or ``[T, B, D]`` too.

``round_outcome`` traces without the dependency contracts (the API's default); only the values show
``indices-unsorted``'s leak. The CLI measures them by default, and so does
``test_the_causal_contract_is_read_with_the_picks_held`` below (``dependencies=True``): ``✗ causal-mask-leaks``.
"""

from __future__ import annotations

from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from tests.corpus.helpers import round_tests, traced_build
from tests.corpus.public50 import mod_router_gather

MODULES = (mod_router_gather,)
UNSURE = ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: each DIMS, then its equal sizes
EXPECTED = {
    (mod_router_gather, ""): [UNSURE, UNSURE],
    (mod_router_gather, "indices-unsorted"): [UNSURE, UNSURE],        # (the values show it: the test below)
}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED)


def test_the_causal_contract_is_read_with_the_picks_held():
    """Before (243f502): both variants ``✗ causal-mask-leaks`` with dependencies measured, the correct one falsely
    (topk picked other tokens when the last one moved)."""
    got = {}
    for bug in ("", "indices-unsorted"):
        report = traced_build(mod_router_gather, bug, mod_router_gather.DIMS[0], dependencies=True).report()
        got[bug] = report.verdict.mark, [d for d in report.diagnostics if d.severity == "error"], report.contracts
    mark, errors, held = got[""]
    assert (mark, errors) == ("?", []) and held[:2] == [BATCH, OWN_TOKEN]
    assert held[2] == f"{CAUSAL} (with topk's picks by value held: which tokens it picks changes with a later one)"
    mark, errors, held = got["indices-unsorted"]
    assert (mark, [d.kind for d in errors]) == ("✗", ["causal-mask-leaks"])
    assert held[:2] == [BATCH, f"{OWN_TOKEN} (with topk's picks by value held: which tokens it picks changes with a "
                               "later one)"]
    assert errors[0].message.endswith("a later token, though the code declares a causal mask "
                                      "(scaled_dot_product_attention #11): the mask lets queries see the future "
                                      "(reversed, or not applied), or another op brings a later token in (a "
                                      "softmax, sum or FFT over the tokens). Measured with topk's picks by value "
                                      "held.")
    assert errors[0].fix.endswith("a causal mask over them needs them in sequence order first (torch.sort the "
                                  "picked indices).")
