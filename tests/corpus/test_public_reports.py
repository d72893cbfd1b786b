"""Files after public bug reports (tests/corpus/reports1; each file's docstring cites its report), probed on
first sight at 1123aec and kept as a regression round: the bug found at every size that shows it, the correct
twin ``✓`` where sizes tell names apart, and ``?`` (never ``✓``, never a false ``✗``) at B = T = H = 4, where
names rest on equal sizes alone.

* keras_heads_first — lsdefine/attention-is-all-you-need-keras issue #36: heads put before the batch
  ``((H·B), T, d)`` while the padding mask is repeated batch-major;
* gazelle_view_order — gazelle93/Transformer-Various-Positional-Encoding issue #1: a batch-major ``[B·H, T, d]``
  viewed head-major ``(H, B, T, d)``;
* shared_head_proj — MarcoMeter/episodic-transformer-memory-ppo PR #22: the input split into heads before one
  shared projection (each head's query sees only its slice of the features): ``?``, not a layout finding;
* gqa_tile — onnx/onnx PR #7274, apple/axlearn PR #842: grouped kv heads tiled where the weights pair query
  head h with kv head h // n_rep;
* mlx_gemma2_mask5d — ml-explore/mlx-lm PR #1903: a ``(B, 1, T, S)`` mask broadcast against 5-D grouped
  scores ``(B, H_kv, r, T, S)``, silent where B = H_kv (torch raises at B = 3, H_kv = 2);
* hyunwoongko_padmask — hyunwoongko/transformer PR #40: the padding mask ``unsqueeze(1).unsqueeze(3)`` on the
  queries, not the keys;
* prefix_lm — THUDM/GLM's prefix mask (tril with the prefix columns opened): correct; the prefix tokens see
  one another by design, and the causal contract must not call that a leak.
"""

from __future__ import annotations

import importlib

import pytest

from tests.corpus.helpers import round_outcome

DISTINCT, OTHER, EQUAL = "B=2 T=6 D=32 H=4", "B=3 T=5 D=48 H=4", "B=4 T=4 D=32 H=4"
GROUPED = {"gqa_tile", "mlx_gemma2_mask5d"}   # (these take H_kv = 2 as well)

#: (file, variant) -> the outcome at DISTINCT, OTHER and EQUAL: the verdict's first character and the kinds
EXPECTED = {
    ("keras_heads_first", ""): [("✓", ()), ("✓", ()), ("?", ())],
    # (? at B = T = H = 4 on c32db91: only one reading of the equal sizes found the mask's order; the others now
    # find a B·H fold lined up with a name of another role, broadcast-mismatch, so every reading errs: reported)
    ("keras_heads_first", "heads-first"): [("✗", ("mask-wrong-batch-order",))] * 3,
    ("gazelle_view_order", ""): [("✓", ()), ("✓", ()), ("?", ())],
    ("gazelle_view_order", "view-head-major"): [("✗", ("mixed-axis",)), ("✗", ("mixed-axis", "mixed-axis")),
                                                ("?", ())],
    ("shared_head_proj", ""): [("✓", ()), ("✓", ()), ("?", ())],
    ("shared_head_proj", "split-then-project"): [("?", ())] * 3,
    ("gqa_tile", ""): [("✓", ()), ("✓", ()), ("?", ())],
    ("gqa_tile", "tile"): [("✗", ("gqa-head-order",))] * 3,
    ("mlx_gemma2_mask5d", ""): [("✓", ()), ("✓", ()), ("?", ())],
    ("mlx_gemma2_mask5d", "mask-4d"): [("✗", ("broadcast-mismatch",)), ("raises", ()), ("raises", ())],
    ("hyunwoongko_padmask", ""): [("✓", ()), ("✓", ()), ("?", ())],
    ("hyunwoongko_padmask", "mask-on-queries"): [("✗", ("mask-wrong-axis",))] * 3,
    ("prefix_lm", ""): [("✓", ()), ("✓", ()), ("?", ())],
}


@pytest.mark.parametrize(("name", "variant"), list(EXPECTED), ids=[f"{n}[{v}]" for n, v in EXPECTED])
def test_each_report_gets_its_outcome_at_every_size(name, variant):
    module = importlib.import_module(f"tests.corpus.reports1.{name}")
    extra = " H_kv=2" if name in GROUPED else ""
    got = [round_outcome(module, variant, dims + extra) for dims in (DISTINCT, OTHER, EQUAL)]
    assert got == EXPECTED[name, variant]


def test_every_file_has_its_variants_listed():
    for name in {n for n, _ in EXPECTED}:
        module = importlib.import_module(f"tests.corpus.reports1.{name}")
        assert {v for n, v in EXPECTED if n == name} == {"", *module.BUGS}, name
