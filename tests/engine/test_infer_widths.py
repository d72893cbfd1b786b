"""engine/infer/widths.py: a projection's features named by their width alone keep the name only where a use
proves it. The case fails on 9203fd5 (noted in the test)."""

import pytest
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


def _modulated(D: int):
    """An adaLN modulation (DiT, Lumina-Next): ``Linear(D, 2·D)`` of a conditioning vector, cut by ``chunk(2)``
    into a scale and a gate of the token stream; no attention reads either."""
    class Modulated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ada = torch.nn.Linear(D, 2 * D)
            self.mix = torch.nn.Linear(D, D)

        def forward(self, x, c):
            scale, gate = self.ada(c).chunk(2, dim=-1)
            return x + gate.unsqueeze(1) * self.mix(x * (1 + scale.unsqueeze(1)))

    torch.manual_seed(0)
    return Modulated().eval()


def test_a_width_the_sizes_add_up_to_as_fused_grouped_query_heads_is_not_read_so():
    """At H = 2·H_kv, (H + 2·H_kv)·d_k = 2·D: the adaLN ``Linear(D, 2·D)`` was named ``D+2*D_kv`` by its size alone
    and its gate ``chunk(2)`` cut off printed ``D_kv+D_kv`` on 99e5d98 (keys and values where there are none). No
    use proves the grouped-query reading (nothing splits it into heads, no attention reads it), so the width is
    the other reading of its size, two of D, and each piece D."""
    with torch.no_grad(), shapetrace.trace(dims="B=2 D=64 H=4 H_kv=2") as t:
        _modulated(64)(torch.randn(2, 6, 64), torch.randn(2, 64))
    ada = next(e for e in t.events if e.op == "linear")
    chunk = next(e for e in t.events if e.op == "chunk")
    assert tuple(ada.outputs[0].shape) == (2, 128) and ada.outputs[0].dims == ("B", "2*D")
    assert [o.dims for o in chunk.outputs] == [("B", "D"), ("B", "D")]
    labels = {d for e in t.events for o in e.outputs for d in o.dims if d}
    assert not any("D_kv" in d for d in labels), labels
    assert verdict_line(t).startswith("? checked 4 of 5 ops")   # (the tokens are undeclared: #4 mix unnamed)


def test_lumina_adaln_gate_is_two_of_d_and_its_tiled_kv_heads_stay_an_error():
    """tests/corpus/public39/lumina_nextdit.py at B=2 D=64 H=4 H_kv=2: on 99e5d98 the adaLN width was
    ``D+2*D_kv`` and the gate ``D_kv+D_kv``. Now ``2*D`` and ``D``; the model's D still reaches the token stream
    through the scale (r39 unnamed the width instead, and ``kv-heads-tiled`` went ✗ -> ?)."""
    from tests.corpus.public39 import lumina_nextdit as module

    found = {}
    for bug in ("", "kv-heads-tiled"):
        model, inputs = module.build(bug)
        with torch.no_grad(), shapetrace.trace(dims=module.DIMS[0]) as t:
            model(*inputs)
        ada = next(e for e in t.events if e.op == "linear" and tuple(e.outputs[0].shape) == (2, 128))
        chunk = next(e for e in t.events if e.op == "chunk")
        found[bug] = (ada.outputs[0].dims, [o.dims for o in chunk.outputs],
                      [d.kind for d in t.diagnostics if d.severity == "error"])
    assert found == {"": (("B", "2*D"), [("B", "D"), ("B", "D")], []),
                     "kv-heads-tiled": (("B", "2*D"), [("B", "D"), ("B", "D")], ["gqa-head-order"])}


def test_a_pick_that_takes_half_of_a_part_unnames_a_width_named_by_its_size():
    """Falcon-7B's multi-query ``query_key_value`` (tests/corpus/public9/falcon_mqa.py, after transformers'
    ``FalconAttention._split_heads``) at H = 2: its width (H + 2)·d_k = 128 is 2·D too, viewed ``(B, T, H + 2,
    d_k)``. On 90abc24 it was named ``2*D``, the heads axis ``2*D/32`` and its queries ``2*D/32[0:2]``: a note
    called the split nonstandard and the file ``✓``, its ``kv-same-slot`` bug (the values read from the key's
    slot) ``✓`` as well. The key head ``[..., [-2], :]`` takes features 64 to 96, half of the second D: the
    width is no two D, so it keeps no name, and neither file earns a check mark."""
    from tests.corpus.public9 import falcon_mqa

    for bug in ("", "kv-same-slot"):
        model, inputs = falcon_mqa.build(bug, H=2)
        with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=2") as t:
            model(*inputs)
        fused, view = t.events[0], t.events[1]
        assert (fused.op, tuple(fused.outputs[0].shape)) == ("linear", (2, 6, 128))
        assert fused.outputs[0].dims == ("B", "T", None)
        assert (view.op, view.outputs[0].dims) == ("view", ("B", "T", None, None))
        assert [d.kind for d in t.diagnostics] == []
        assert verdict_line(t).startswith("? checked 2 of 23 ops"), bug


@pytest.mark.parametrize("layout", ["parts-first", "heads-first"])
def test_a_pick_inside_a_part_or_of_scattered_features_keeps_the_width_named(layout):
    """Controls: a fused ``Linear(D, 3·D)`` viewed ``(B, T, 3, H, d_k)`` keeps its parts as rows of the view, so a
    pick of one query head (``[:, :, 0, 1]``, features 16 to 32) cuts no part of it; GPT-NeoX's per-head layout
    ``(B, T, H, 3·d_k)`` cut ``[..., :d_k]`` takes features scattered over every head, no run. Both keep ``3*D``."""
    B, T, D, H = 2, 6, 64, 4
    qkv = torch.nn.Linear(D, 3 * D)
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        if layout == "parts-first":
            parts = qkv(x).view(B, T, 3, H, D // H)                       # (B, T, 3, H, d_k)
            q, k, v = parts.permute(2, 0, 3, 1, 4)                        # (B, H, T, d_k) each
            first = parts[:, :, 0, 1]                                     # (B, T, d_k): one query head
            out = (q.softmax(-1) @ k.transpose(-2, -1)).softmax(-1) @ v   # (B, H, T, d_k)
            out = out.transpose(1, 2).reshape(B, T, D) * first.mean(-1, keepdim=True)   # (B, T, D)
        else:
            heads = qkv(x).view(B, T, H, 3 * (D // H)).transpose(1, 2)     # (B, H, T, 3·d_k)
            q, k, v = heads[..., :D // H], heads[..., D // H:2 * D // H], heads[..., 2 * D // H:]
            out = ((q @ k.transpose(-2, -1)).softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)   # (B, T, D)
    assert t.events[0].outputs[0].dims == ("B", "T", "3*D")
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
