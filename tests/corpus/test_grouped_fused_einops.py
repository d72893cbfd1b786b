"""InternLM2's grouped fused projection split with einops (tests/corpus/public9/internlm2.py), a file the
Falcon work of this round never saw: the same mechanism (a fused width of whole heads factors as its heads ×
d_k, per group ``(H_kv, n_rep + 2)``; :func:`shapetrace.engine.axes._fused_head_decompositions`) names it
through ``rearrange``. On 1723990 (before that work) every run of it was ``?`` but the merge without its
transpose: ``? checked 5 of 24 ops``, the grouped view and every pick unnamed, and the queries flattened
group-minor (``(gs h)``) went unseen."""

from __future__ import annotations

import pytest

from tests.corpus.helpers import round_outcome, traced_build
from tests.corpus.public9 import internlm2

SIZES = ("B=2 T=6 D=32 H=4 H_kv=2", "B=4 T=4 D=32 H=4 H_kv=2", "B=1 T=6 D=32 H=4 H_kv=2")


def test_internlm2_is_named_through_its_grouped_einops_split():
    assert [round_outcome(internlm2, "", d) for d in SIZES] == [("✓", ()), ("?", ()), ("✓", ())]
    t = traced_build(internlm2, "", SIZES[0])
    grouped = next(e for e in t.events if e.op == "reshape" and len(e.output.shape) == 5).output
    assert (grouped.shape, grouped.dims) == ((2, 6, 2, 4, 8), ("B", "T", "H_kv", "n_rep+2", "d_k"))


@pytest.mark.parametrize("dims", SIZES)
def test_queries_flattened_group_minor_pair_with_the_wrong_key_heads(dims):
    t = traced_build(internlm2, "gs-first", dims)
    (d,) = [d for d in t.diagnostics if d.severity == "error"]
    assert d.kind == "batch-mismatch"
    assert "batch axis n_rep*H_kv of the first lines up with H of the second" in d.message


def test_the_merge_without_its_transpose_stays_an_error():
    assert [round_outcome(internlm2, "merge-no-transpose", d) for d in SIZES] == [
        ("✗", ("mixed-axis",)), ("✗", ("tokens-merged-with-features",)), ("✗", ("mixed-axis",))]
