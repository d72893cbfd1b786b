"""engine/infer/widths.py: a projection's features named by their width alone keep the name only where a use
proves it. The case fails on 9203fd5 (noted in the test)."""

import torch

import shapetrace
from tests.corpus.helpers import verdict_line
from tests.corpus.public19 import synthesizer_dense


def test_a_width_viewed_as_heads_and_cut_off_its_parts_keeps_no_name():
    # on 9203fd5: ✗ broadcast-mismatch at the add, [1, 4, T, T] facing [B, H, T, 2*d_k[0:6]] (the dense
    # width H·max_len = 64 named 2·D by its size, its per-head max_len = 16 named 2·d_k, cut at T = 6: no
    # bound of two d_k = 8, so the width is no two of anything)
    model, inputs = synthesizer_dense.build("", B=2, T=6, D=32, H=4)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        model(*inputs)
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    cut = next(e for e in t.events if e.op == "__getitem__" and tuple(e.outputs[0].shape) == (2, 6, 4, 6))
    assert cut.outputs[0].dims == ("B", "T", None, "T")   # (the cut's stop is x.shape's T; H·max_len unnamed)
    assert verdict_line(t).startswith("? checked")
