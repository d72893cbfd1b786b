"""transformers' eager Llama fed the 4-D causal mask of a left-padded batch (tests/corpus/public9/
llama_left_padding.py): the first queries of the padded sequence have no key left, and softmax spreads them
evenly over every key. Two mechanisms read it right:

* the leak check (:mod:`shapetrace.engine.dependencies`) leaves out the query rows whose attention weights
  are the same on every key in every head (:mod:`shapetrace.engine.unattended`): their output is padding, and
  its dependence on later tokens is no leak. On 4c4dd9a the correct file was ``✗ causal-mask-leaks``
  ("output token 0 of batch 0 depends on input token 5"), measured at a padded query;
* a mask that hides the keys before each query, besides keys it hides from every query of a sequence (its
  padding), is a causal mask reversed (``hides_side`` ``"past-and-padding"``): the reversed triangle in a
  padded batch's mask was ``✓`` (it was read as some other pattern and the layout is right).
"""

from __future__ import annotations

import pytest
import torch

import shapetrace
from tests.corpus.helpers import round_outcome
from tests.corpus.public9 import llama_left_padding as llama

SIZES = ("B=2 T=6 D=32 H=4 H_kv=2", "B=4 T=4 D=32 H=4 H_kv=2", "B=1 T=6 D=32 H=4 H_kv=2")


def _measured(bug: str, dims: str):
    """The file traced as ``shapetrace trace`` traces its script: the mask made inside the trace (its triangle
    declares the causal mask), the dependency contracts measured after the run."""
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    model, (x, _) = llama.build(bug, **sizes)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        t.check_dependencies()
        model(x, llama.left_padded_mask(sizes["B"], sizes["T"], bug))
    return t


def test_the_padded_queries_with_no_key_left_are_no_leak():
    t = _measured("", SIZES[0])
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.contracts == ["batch entries stay apart", "each token depends on itself", "the causal mask holds"]
    assert "held on the values: batch entries stay apart, each token depends on itself, the causal mask holds" \
        in t.report().verdict.line


def test_the_padded_rows_are_the_ones_left_out():
    from shapetrace.engine.unattended import unattended_rows

    t = _measured("", SIZES[0])
    assert unattended_rows(t._uniform_rows, 2, 6) == {(0, 0), (0, 1)}   # sequence 0's two padded queries


def test_at_equal_sizes_the_reversed_triangle_earns_no_check_mark():
    # (made inside the trace at B = T = 4 the mask reads [B, 1, B, T] or [B, 1, T, T]: no reading is proven)
    assert _measured("triangle-reversed", SIZES[1]).report().verdict.line.startswith("? nothing was checked")


@pytest.mark.parametrize("dims", [SIZES[0], SIZES[2]])
def test_a_reversed_triangle_in_a_padded_batchs_mask_is_reversed(dims):
    t = _measured("triangle-reversed", dims)
    kinds = [d.kind for d in t.diagnostics if d.severity == "error"]
    assert kinds[0] == "causal-mask-reversed", kinds
    assert "exactly the keys before each query ([B=" in t.diagnostics[0].message
    assert "besides the padding keys it hides from every query, and keeps those after it" in t.diagnostics[0].message


def test_outcomes_at_every_size():
    assert [round_outcome(llama, "", d) for d in SIZES] == [("✓", ()), ("?", ()), ("✓", ())]
    assert [round_outcome(llama, "triangle-reversed", d)[0] for d in SIZES] == ["✗"] * 3
