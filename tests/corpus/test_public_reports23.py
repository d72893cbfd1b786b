"""A twenty-third round of files after public bug reports (tests/corpus/reports23; each file's docstring cites
its report), traced at their DIMS and, for two rows, at B = T = H = 4 (the other rows' equal-size column was
measured once and is kept in the table: the suite's time is a budget), first sight recorded on 9412ea5 (the
files committed before any engine change). A short round: four files (a fifth was not found in time: the
reports searched, x-transformers PR #103, xformers issue #103, Gemma3 issue #39389, aft-pytorch issue #1,
TransformerLens issue #1609, were already in the corpus).

* st_lasttoken_full_rows — huggingface/sentence-transformers PR #2111: last-token pooling indexed by
  ``argmin(attention_mask, 1) - 1`` clamped at 0, so a row without padding pooled its first token;
* mosaic_cache_positions — mosaicml/examples PR #244 (review): the KV cache's decoding step embedded its
  token at ``wpe(arange(S))``, position 0, the cache's length left out;
* uniad_plan_cumsum_xy — OpenDriveLab/UniAD issue #92: the planning head's ``cumsum`` over the (x, y) pair
  (``dim=2``) instead of the planning steps;
* min_dt_dropout_output — nikhilbarhate99/min-decision-transformer issue #2: the attention dropout on the
  output instead of the weights; identical in ``eval()``, so a twin.

First sight (``round_outcome``, no dependency contracts: at DIMS / at equal sizes; the CLI, ``cd /tmp &&
shapetrace trace FILE [bug] --dims "B=2 T=6 D=32 H=4"``, which measures the dependency contracts, in the last
column):

======================  ===================  =============================  =====================  ==================
file                    variant              round_outcome on 9412ea5       CLI on 9412ea5         CLI now (d2bb830)
======================  ===================  =============================  =====================  ==================
st_lasttoken_full_rows  (correct)            ✓ / ?                          ✓ all 30               unchanged
st_lasttoken_full_rows  argmin-first-token   ✓ / ?                          ✓ all 28               ✗ pooled-misses-
                                                                                                   last-token
mosaic_cache_positions  (correct)            ? / ?                          ? 42 of 46             unchanged
mosaic_cache_positions  positions-from-zero  ? / ?                          ? 42 of 46             unchanged
uniad_plan_cumsum_xy    (correct)            ? / ?                          ? 15 of 26             unchanged
uniad_plan_cumsum_xy    cumsum-over-xy       ? / ?                          ? 15 of 26             unchanged
min_dt_dropout_output   (correct)            ? / ?                          ? 0 of 35              unchanged
min_dt_dropout_output   dropout-on-output    ? / ?                          ? 0 of 35              unchanged
======================  ===================  =============================  =====================  ==================

At first sight the 4 correct files were ✓ 1, ? 3, ✗ 0 (and the twin ?); the 3 bugs ✓ 1 (st_lasttoken's
first-token pool, in both paths), ? 2, ✗ 0. The fix (engine/pooled.py, a dependency contract): under a declared
causal mask, a pooled output (no token axis) must change when an unpadded entry's last token moves, claimed
only where a padding mask among the call's arguments proves entry 0 has no padding. The CLI now gives the bug
``✗``; ``round_outcome`` does not measure the dependency contracts, so there it stayed ``✓`` (a named miss of
that path until eefe532), and :func:`test_the_cli_path_crosses_the_first_token_pool` checks the CLI's path.
Since engine/pooled.py's ``pooled-read-unmeasured`` note, a causal model's pooled output whose token is picked
from a mask among its arguments and was not measured (the Python API without ``dependencies=True``, as
``round_outcome`` traces) is ``?`` with why, never ``✓``: both st_lasttoken rows are ``? / ?`` there (the
correct one was ``✓``; no bug keeps ``✓`` in either path).

Open (a later round):

* mosaic_cache_positions (bug): ``?``. The decoding step's positions ``arange(0, 1)`` against a cache of T
  keys: the ``wpe`` lookup (``#24 embedding``) is left unnamed, so no contract reads that the step's position
  is not the cache's length (the class of reports2 roformer_past_positions, here with learned positions).
  Done on 2026-12-02 (stop 62): ``engine/lookups.restarted_positions`` reads the positions the trace counted
  (the step's lookup starts where the prefill's did, and its keys are joined after the cache): ``✗
  positions-restart``; the correct file ``✓`` (its step mask ``ones(1, T+1).tril(T)`` named ``[1, T+1]``, a 1
  read from an unnamed axis being a size-1 axis). tests/engine/test_positions_restart.py.
* uniad_plan_cumsum_xy: ``?`` on both. The ``view(-1, planning_steps, 2)`` names neither the 3 planning steps
  nor the (x, y) pair, so the scan's axis (``dim=2`` vs ``dim=1``) cannot be judged.
* min_dt_dropout_output: ``? 0 of 35`` on both: the interleaved (return, state, action) tokens
  ``stack(dim=1).permute(0, 2, 1, 3).reshape(B, 3 * T, D)`` leave every axis unnamed (the twin is
  indistinguishable in ``eval()`` by design).
* the equal-size column is ``?`` throughout (nothing is named by size alone).
"""

from __future__ import annotations

from tests.corpus.helpers import round_tests
from tests.corpus.reports23 import (
    min_dt_dropout_output,
    mosaic_cache_positions,
    st_lasttoken_full_rows,
    uniad_plan_cumsum_xy,
)

MODULES = (st_lasttoken_full_rows, mosaic_cache_positions, uniad_plan_cumsum_xy, min_dt_dropout_output)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (st_lasttoken_full_rows, ""): [UNSURE, UNSURE],
    (st_lasttoken_full_rows, "argmin-first-token"): [UNSURE, UNSURE],
    (mosaic_cache_positions, ""): [OK, UNSURE],   # (? -> ✓ on 2026-12-02: the step's mask named)
    (mosaic_cache_positions, "positions-from-zero"): [("✗", ("positions-restart",)), UNSURE],   # (? -> ✗ on 2026-12-02)
    (uniad_plan_cumsum_xy, ""): [UNSURE, UNSURE],
    (uniad_plan_cumsum_xy, "cumsum-over-xy"): [UNSURE, UNSURE],
    (min_dt_dropout_output, ""): [UNSURE, UNSURE],
    (min_dt_dropout_output, "dropout-on-output"): [UNSURE, UNSURE],
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(st_lasttoken_full_rows, "argmin-first-token"), (mosaic_cache_positions, "positions-from-zero")}
#: bugs that keep ``✓`` in ``round_outcome``: none since pooled-read-unmeasured (st_lasttoken's did on eefe532)
MISSED = frozenset()

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED, missed=MISSED)


def test_the_cli_path_crosses_the_first_token_pool():
    """With the dependency contracts measured (as the CLI does), the first-token pool of the row without
    padding is ``✗`` with one ``pooled-misses-last-token`` and the last-token pool stays ``✓`` (on b2f62da both
    were ``✓``)."""
    import torch

    import shapetrace

    marks = {}
    for bug in ("", "argmin-first-token"):
        model, inputs = st_lasttoken_full_rows.build(bug)
        with torch.no_grad(), shapetrace.trace(dims=st_lasttoken_full_rows.DIMS[0], dependencies=True) as t:
            model(*inputs)
        report = t.report()
        marks[bug] = report.verdict.mark, [d.kind for d in report.diagnostics if d.severity == "error"]
    assert marks == {"": ("✓", []), "argmin-first-token": ("✗", ["pooled-misses-last-token"])}
