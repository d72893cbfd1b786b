"""shapetrace/engine/rules/channels.py: attention over channels (cross-covariance attention, timm's XCiT ``XCA``,
tests/corpus/public12/xcit.py) and the softmax over features that is a slip.

On 1123aec (main before round 12) the correct XCiT file was ``✗ attends-over-features`` (a false error) with two
``normalised-over-tokens`` warnings at B=2 T=6 (its cosine step normalises each channel's row over the tokens,
the axis its product sums over), and its bug (``F.normalize(q, dim=-2)``) read the same ``✗``: neither told
apart. Now the correct file is a note and ``?`` (nothing torch records tells the design from q, k and v all
permuted by one slip), and the bug is ``!`` with a ``normalised-across-the-product`` warning on each normalize."""

from __future__ import annotations

from tests.corpus.bug_models import softmax_over_features, trace
from tests.corpus.helpers import findings, traced_build, verdict_line
from tests.corpus.public12 import xcit

DIMS = "B=2 T=6 D=64 H=4"


def test_cross_covariance_attention_is_a_note_and_leaves_the_verdict_unproven():
    t = traced_build(xcit, "", DIMS)
    assert [(d.kind, d.severity, d.event) for d in t.diagnostics] == [("attends-over-channels", "note", 8)]
    assert t.diagnostics[0].message == (
        "softmax #8 normalises [B=2, H=4, d_k=16, d_k=16] over d_k, a feature axis of a d_k × d_k product that "
        "summed over the tokens, and matmul #9 mixes each token's features of the values with the weights "
        "([B=2, H=4, d_k=16, T=6]): attention over channels (cross-covariance attention, XCiT), by design or by "
        "one slip in the layout of q, k and v; the run cannot say which.")
    assert verdict_line(t).startswith(
        "? checked 13 of 13 ops that could carry a layout bug; not proven: a softmax over the features of a "
        "feature-by-feature product weighs the values' features (attention over channels by design, or one slip "
        "in the layout of q, k and v); no errors or warnings in what was checked")


def test_normalising_across_the_rows_the_product_compares_is_a_warning():
    t = traced_build(xcit, "normalize-channels", DIMS)
    assert findings(t) == ("normalised-across-the-product",) * 2
    assert [d.event for d in t.diagnostics if d.severity == "warning"] == [4, 5]
    assert t.diagnostics[0].message == (
        "normalize #4 divides [B=2, H=4, d_k=16, T=6] by its norm along axis 2 (d_k), but the product that reads "
        "it sums over the tokens (T): it compares rows over the tokens, each of which is now scaled by a norm taken "
        "across the rows.")
    assert verdict_line(t).startswith("! no errors, 2 warnings; checked 13 of 13 ops")


def test_a_softmax_over_features_that_weighs_no_values_stays_an_error():
    t, _ = trace(softmax_over_features, 2, 6, 64, 4)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["attends-over-features"]
    assert verdict_line(t)[0] == "✗"
