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


def test_a_rotated_and_repeated_key_is_still_read_by_attention():
    """Gemma-2's ``k_proj`` at H_kv·head_dim = D (32 = 2·16): its width is named ``D_kv`` by its use, a view into
    H_kv heads of d_k that attention reads. Between the projection and the scores, the key's rotation
    (``k * cos + rotate_half(k) * sin``) and ``repeat_kv`` put ten ops, past the eight the search looked through
    on 52a05d7: the key stayed unnamed and the correct file (tests/corpus/reports18/gemma2_flex_no_transpose.py,
    huggingface/transformers PR #34942) was ``? checked 31 of 38``; now ``✓``, its bug still ✗ mixed-axis."""
    from tests.corpus.reports18 import gemma2_flex_no_transpose as module

    lines, keys = {}, {}
    for bug in ("", "flex-no-transpose"):
        model, inputs = module.build(bug)
        with torch.no_grad(), shapetrace.trace(dims=module.DIMS[0]) as t:
            model(*inputs)
        lines[bug] = verdict_line(t)
        keys[bug] = [e for e in t.events if e.op == "linear"][1].outputs[0].dims          # (k_proj)
        if bug:
            assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["mixed-axis"]
    assert keys == {"": ("B", "T", "D_kv"), "flex-no-transpose": ("B", "T", "D_kv")}
    assert lines[""].startswith("✓ checked all 38 ops") and lines["flex-no-transpose"].startswith("✗ 1 error")
