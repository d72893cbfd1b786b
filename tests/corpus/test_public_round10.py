"""A tenth round of public-style files (tests/corpus/public10): transformers' SDPA path over a left-padded
batch (mistral_sdpa_left_padding.py). The boolean mask opens the rows of the queries left with no key
(``_unmask_unattended``), so what a causal mask hides is read with those rows set aside
(:func:`shapetrace.engine.directions.rows_set_aside`):

* a set-aside query that is itself a padding token (hidden from every other query that could see it) is
  padding: its dependence on later tokens is no leak (:mod:`shapetrace.engine.unattended`). On 02eb97b the
  correct file traced as a script was ``✗ causal-mask-leaks`` ("output token 0 of batch 0 depends on input
  token 5");
* a set-aside query whose own token other queries attend to is a real token left with no key: the padding
  laid on the queries (``mask-wrong-axis``), and a triangle that hides each query's own key under the opened
  first row is ``causal-mask-hides-itself``. With the mask made outside the trace both were ``✓`` on 02eb97b.
"""

from __future__ import annotations

import pytest
import torch

import shapetrace
from shapetrace.engine.directions import hidden_side
from tests.corpus.helpers import error_kinds, round_outcome, traced_build
from tests.corpus.public10 import mistral_sdpa_left_padding as mistral

SIZES = ("B=2 T=6 D=32 H=4 H_kv=2", "B=4 T=4 D=32 H=4 H_kv=2", "B=1 T=6 D=32 H=4 H_kv=2")


def _as_script(bug: str, dims: str):
    """Traced as ``shapetrace trace`` traces the file: the mask made inside the trace, the dependency
    contracts measured after the run."""
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    model, (x, _) = mistral.build(bug, **sizes)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        t.check_dependencies()
        model(x, mistral.left_padded_mask(sizes["B"], sizes["T"], bug))
    return t


def test_the_opened_rows_of_padded_queries_are_no_leak():
    t = _as_script("", SIZES[0])
    assert error_kinds(t) == []
    assert t.contracts == ["batch entries stay apart", "each token depends on itself", "the causal mask holds"]


def test_the_padded_queries_are_the_rows_set_aside():
    from shapetrace.engine.unattended import masked_rows, unattended_rows

    t = _as_script("", SIZES[0])
    assert unattended_rows(masked_rows(t.capture.records), 2, 6) == {(0, 0), (0, 1)}   # sequence 0's padding


def test_what_the_opened_mask_hides():
    hides = ~mistral.left_padded_mask(2, 6)                                        # (B, 1, T, T): True hides
    assert hidden_side(hides, (6, 6)) == {"hides_side": "future-and-padding", "no_key_left": ((2, 1, 6), (0, 1))}
    # (a plain causal mask: its last query sees every key, and is no padding)
    assert hidden_side(torch.ones(6, 6, dtype=torch.bool).triu(1), (6, 6)) == {"hides_side": "future"}
    queries = ~mistral.left_padded_mask(2, 6, "pad-on-queries")
    assert hidden_side(queries, (6, 6)) == {"hides_side": "future", "blind_queries": ((2, 1, 6), (0, 1))}


@pytest.mark.parametrize("dims", SIZES)
def test_padding_laid_on_the_queries_is_the_wrong_axis(dims):
    t = traced_build(mistral, "pad-on-queries", dims)   # (the mask made outside the trace)
    assert error_kinds(t) == ["mask-wrong-axis"]
    assert t.diagnostics[0].message.startswith(
        "scaled_dot_product_attention #15 puts a causal mask [B=")
    assert ("that leaves query 0 at [0, 0] of the mask's leading axes [B=" in t.diagnostics[0].message)
    assert ("with no key at all (every key hidden, or every key opened as a row with none left), though other "
            "queries attend to its own token, 2 such queries in all: a real token is masked along the queries"
            ) in t.diagnostics[0].message


@pytest.mark.parametrize("dims", SIZES)
def test_an_opened_triangle_hiding_each_query_itself_is_found(dims):
    t = traced_build(mistral, "causal-off-by-one", dims)
    assert error_kinds(t) == ["causal-mask-hides-itself"]


def test_outcomes_at_every_size():
    assert [round_outcome(mistral, "", d) for d in SIZES] == [("✓", ()), ("?", ()), ("✓", ())]
    for bug in mistral.BUGS:
        assert [round_outcome(mistral, bug, d)[0] for d in SIZES] == ["✗"] * 3, bug


# -- GPT-NeoX's torch.where(causal_mask, scores, mask_value) (tests/corpus/public10/gpt_neox.py) -------------------
# The keep-mask taken for a hide-mask hides each query's past and its own key: at a batch of one (no dependency
# contracts) it was ✓ on 02eb97b, the pattern read as no side at all.
NEOX_SIZES = ("B=2 T=6 D=64 H=4", "B=4 T=4 D=64 H=4", "B=1 T=6 D=64 H=4")


@pytest.mark.parametrize("dims", [NEOX_SIZES[0], NEOX_SIZES[2]])
def test_a_keep_mask_taken_for_a_hide_mask_is_reversed(dims):
    from tests.corpus.public10 import gpt_neox

    t = traced_build(gpt_neox, "where-reversed", dims)
    assert error_kinds(t) == ["causal-mask-reversed"]
    assert ("where #29 hides, along the keys (axis -1, T) of the scores [B=" in t.diagnostics[0].message)
    assert ("exactly the keys before each query and its own key ([1, 1, T=6, T=6]) and keeps those after it: a "
            "causal mask reversed") in t.diagnostics[0].message


def test_the_hidden_side_of_a_keep_mask():
    keep = torch.ones(6, 6, dtype=torch.bool).tril()
    assert hidden_side(keep, (6, 6)) == {"hides_side": "past-and-self"}
    assert hidden_side(~keep, (6, 6)) == {"hides_side": "future"}


def test_gpt_neox_outcomes_at_every_size():
    from tests.corpus.public10 import gpt_neox

    assert [round_outcome(gpt_neox, "", d) for d in NEOX_SIZES] == [("✓", ()), ("?", ()), ("✓", ())]
    assert [round_outcome(gpt_neox, "where-reversed", d)[0] for d in NEOX_SIZES] == ["✗"] * 3
