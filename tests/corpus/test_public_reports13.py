"""A thirteenth round of files after public bug reports (tests/corpus/reports13; each file's docstring cites its
report), traced at their DIMS and at B = T = H = 4, first sight recorded on f2f1c37 (the engine of 062deef)
before any fix.

* mgca_token_type_positions — HKU-MedAI/MGCA issue #13: BERT called with ``position_ids=token_type_ids`` (all
  zero): every token reads the position embedding of position 0;
* gpt2_left_pad_positions — ndif-team/nnsight issue #672 (PR #673): a left-padded GPT-2 batch with
  ``position_ids = arange(T)`` for every row, not ``cumsum(mask) - 1``;
* gemma3_mask_unplumbed — huggingface/transformers issue #39389: Gemma 3's image-aware mask built from
  ``token_type_ids`` but the plain causal mask handed to the attention;
* openclip_cls_pad_mask — mlfoundations/open_clip PR #312: CoCa's CLS, appended after the padded text, reads
  the padding (the causal mask alone, no ``cls_mask``).

First sight (``round_outcome``: at DIMS / at equal sizes; the CLI, ``cd /tmp && shapetrace trace FILE [bug]
--dims "B=2 T=6 D=32 H=4"`` (``H_kv=2`` for Gemma 3), which measures the dependency contracts):

=========================  =======================  ===========================================  ================
file                       variant                  first sight on f2f1c37 (DIMS/equal; CLI)     now (CLI)
=========================  =======================  ===========================================  ================
mgca_token_type_positions  (correct)                ✓ 23 ops / ?; CLI ✓                          unchanged
mgca_token_type_positions  token-type-as-positions  ✓ 22 ops / ?; CLI ✓ (missed)                 CLI ? (caught)
gpt2_left_pad_positions    (correct)                ✓ 25 ops / ?; CLI ✗ causal-mask-leaks        CLI ✓ 26 ops
                                                    (false: a left-padded query, no key left)
gpt2_left_pad_positions    positions-without-mask   ✓ 24 ops / ?; CLI ✗ causal-mask-leaks (the   CLI ? (caught)
                                                    same false reason, not the bug)
gemma3_mask_unplumbed      (correct)                ? 51 of 51 / ? 25 of 51; CLI ? (#6           unchanged
                                                    ``pad(is_image)[:, :-1]`` keeps (1+T)[0:6])
gemma3_mask_unplumbed      causal-mask-passed       ? 52 of 52 / ? 24 of 52; CLI ? (the same)    unchanged
openclip_cls_pad_mask      (correct)                ? 35 of 39 / ? 0 of 39; CLI ? (the           unchanged
                                                    ``cls_mask`` pad, repeat_interleave unnamed)
openclip_cls_pad_mask      no-cls-mask              ✓ 36 ops / ?; CLI ✓ (missed)                 unchanged
=========================  =======================  ===========================================  ================

At first sight, at DIMS (``round_outcome``), the 4 correct files were ✓ 2, ? 2, ✗ 0 (the CLI: ✓ 1, ? 2, ✗ 1,
false); the 4 bugs ✗ 0, ? 1, ✓ 3 (the CLI: ✗ 1 for a false reason, ? 1, ✓ 2). Now the CLI's correct files are
✓ 2, ? 2, ✗ 0; its bugs ✗ 0, ? 1, ✓ 3. The fix: engine/unattended.uniform_rows sets aside a query with no key
left under two added masks (GPT-2's ``where(causal, w, min)`` then ``+ (1 - mask) * min`` pushes a key hidden by
both to ``-inf``, so the row is even on its other keys only), tested in tests/engine/test_unattended.py.

Round 14 (reports14): the file's correct form was PR #312's mask as merged, ``F.pad(cls_mask, (1, 0, T, 0))``,
which open_clip issue #549 (and #1113; PR #1084's ``correct_cls_mask``) shows is itself wrong: a mask for a CLS
placed first, while CoCa appends it last. Once engine/rules/masks.py read mask names under names from sizes
alone (where each name's size is its own), that form became ``✗ mask-wrong-axis`` (its key axis ``1+T`` against
the keys' ``T+1``), a true finding: the correct form now pads on the right, ``(0, 1, T, 0)`` (``?``, as
before, at DIMS and at equal sizes), and the merged one is the bug ``cls-mask-first`` (``✗`` at DIMS, ``?`` at
equal sizes, where the names rest on sizes that H shares).

Known misses (value-level slips no name or layout contract decides, each a ``missed`` row and an xfail below):

* MGCA (caught since the commit after b2f62da, ``?``): the position table indexed by the token types. No check
  says which ids a table should take, but the token types now read two tables whose lookups are added
  (engine/lookups.ids_read_twice: two tables read by one ids tensor are one table of their sums): an
  ``ids-read-by-two-tables`` note, no ``✓``; the correct file's tables each read their own ids (still ``✓``);
* GPT-2 (caught since the commit after b2f62da, ``?``): positions counted from column 0 under a left-padded mask.
  engine/rules/unread.positions_shared_over_padding: ``wpe`` is read by one row of positions shared by every entry
  (``arange(T)[None]``) while the ``attention_mask`` given has a row padded in front (engine/unread.front_padded),
  the same token axis by name: a ``positions-shared-over-padding`` note, no ``✓`` (a note, not ``✗``: a model
  may have been trained so). The correct file's per-row ``cumsum(mask) - 1`` keeps its ``✓``;
* open_clip: which tokens are padding is never computed in the bug (``text != pad_id`` is the fix's own line),
  so nothing in the run tells the CLS's reads of them from its reads of text. The padding contract
  (engine/padding.py, "padding stays unread") needs a padding mask given to the call beside its input, used
  as a mask; the model is given token ids alone, so it is not measured here either (the CLI: ``✓``, unchanged).

Open (``?``): Gemma 3's bug drops the image blocks it built (the bidirectional mask is computed and never read)
and both variants stay ``?`` on the one cut ``pad(is_image, (1, 0))[:, :-1]`` (a shift of a (B, T) flag table);
open_clip's correct file leaves the ``cls_mask`` ops unnamed.
"""

from __future__ import annotations

import pytest

from tests.corpus.helpers import round_outcome, round_tests
from tests.corpus.reports13 import (
    gemma3_mask_unplumbed,
    gpt2_left_pad_positions,
    mgca_token_type_positions,
    openclip_cls_pad_mask,
)

MODULES = (mgca_token_type_positions, gpt2_left_pad_positions, gemma3_mask_unplumbed, openclip_cls_pad_mask)
OK, UNSURE = ("✓", ()), ("?", ())

#: (module, variant) -> the outcome at each of ``round_sizes(module)``: DIMS, then B = T = H = 4
EXPECTED = {
    (mgca_token_type_positions, ""): [OK, UNSURE],
    (mgca_token_type_positions, "token-type-as-positions"): [UNSURE, UNSURE],    # (✓, missed, up to b2f62da)
    (gpt2_left_pad_positions, ""): [OK, UNSURE],
    (gpt2_left_pad_positions, "positions-without-mask"): [UNSURE, UNSURE],      # (✓, missed, up to b2f62da)
    (gemma3_mask_unplumbed, ""): [UNSURE, UNSURE],
    (gemma3_mask_unplumbed, "causal-mask-passed"): [UNSURE, UNSURE],
    (openclip_cls_pad_mask, ""): [UNSURE, UNSURE],
    (openclip_cls_pad_mask, "no-cls-mask"): [OK, UNSURE],                       # (missed)
    (openclip_cls_pad_mask, "cls-mask-first"): [("✗", ("mask-wrong-axis",)), UNSURE],   # (added in round 14)
}
MISSED = {
    (openclip_cls_pad_mask, "no-cls-mask"):
        "the CLS reads the padding, but the bug never computes which tokens are padding (text != pad_id)",
}
#: the rows also traced at equal sizes (the others' equal-size outcomes measured once, above)
EQUAL_TESTED = {(gpt2_left_pad_positions, "positions-without-mask")}

test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code = \
    round_tests(MODULES, EXPECTED, equal_tested=EQUAL_TESTED, missed=frozenset(MISSED))


@pytest.mark.parametrize(("module", "bug"), [
    pytest.param(m, b, marks=pytest.mark.xfail(strict=True, reason=why), id=f"{m.__name__.rsplit('.', 1)[1]}-{b}")
    for (m, b), why in MISSED.items()])
def test_known_misses_get_no_check_mark(module, bug):
    assert round_outcome(module, bug, module.DIMS[0])[0] != "✓"


@pytest.mark.parametrize("bug", ["", "positions-without-mask"])
def test_the_cli_finds_the_left_padded_gpt2s_padding_unread(bug):
    """``shapetrace trace`` measures the padding contract (engine/padding.py) on the given ``attention_mask``:
    both variants keep the padding unread (the bug is in the positions, which this contract does not read); on
    d4a212b the verdict listed no such contract. The bug's verdict was ``✓ checked all`` up to b2f62da; it is now
    ``?`` for its positions (``positions-shared-over-padding``), the contracts still held."""
    from typer.testing import CliRunner

    from shapetrace.cli.app import app

    script, dims = gpt2_left_pad_positions.__file__, gpt2_left_pad_positions.DIMS[0]
    args = ["trace", script, *([bug] if bug else []), "--dims", dims]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0
    start = result.output.index("? checked 25 of 25" if bug else "✓ checked all")
    verdict = " ".join(result.output[start:].split())   # (the verdict, unwrapped)
    assert ("positions-shared-over-padding" in result.output) == bool(bug)
    assert "held on the values: batch entries stay apart, each token depends on itself, the causal mask holds, " \
           "padding stays unread;" in verdict
    assert "✗" not in result.output


def test_left_padded_gpt2_positions_counted_from_column_0_are_not_checked():
    """``positions-without-mask`` was ``✓`` (a strict xfail, ``missed``) on b2f62da."""
    assert round_outcome(gpt2_left_pad_positions, "positions-without-mask", gpt2_left_pad_positions.DIMS[0]) \
        == ("?", ())


def test_a_position_table_read_by_the_token_types_is_not_checked():
    """``token-type-as-positions`` was ``✓`` (a strict xfail, ``missed``) on b2f62da."""
    assert round_outcome(mgca_token_type_positions, "token-type-as-positions", mgca_token_type_positions.DIMS[0]) \
        == ("?", ())

