"""engine/readings.py: a finding resting on the order of equal sizes is never reported.

An input whose shape fits two orders of the declared sizes (``[4, 4, 32]`` at B = T = 4 is ``[B, T, D]``
or ``[T, B, D]``) is seeded in the declared order; a finding that the other order does not make is left
out, named in one ``order-of-equal-sizes`` note, and the verdict says why it is ``?``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import shapetrace
from shapetrace import NOT_ASKED
from tests.corpus.helpers import traced_build
from tests.corpus.public7 import chatglm2, fairseq_mha

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"

EQUAL, DISTINCT = "B=4 T=4 D=32 H=4", "B=2 T=6 D=32 H=4"


def fairseq_style(x: torch.Tensor, H: int, bug: str = "") -> torch.Tensor:
    """facebookresearch/fairseq, fairseq/modules/multihead_attention.py: sequence-first ``(tgt_len, bsz,
    embed_dim)``, heads folded into the batch by ``q.contiguous().view(tgt_len, bsz * num_heads, head_dim)
    .transpose(0, 1)``, ``torch.bmm`` scores, merged back by ``attn.transpose(0, 1).contiguous().view(tgt_len,
    bsz, embed_dim)``; ``merge-no-transpose`` drops that transpose (rows of ``(bsz·H, T, d)`` read as tokens),
    ``scale-by-D`` scales the scores by the model's width."""
    T, B, D = x.shape                                                    # (T, B, D)
    q = x.contiguous().view(T, B * H, D // H).transpose(0, 1)            # (B·H, T, d_k)
    scale = math.sqrt(D if bug == "scale-by-D" else D // H)             # bug: 1/√D, not 1/√d_k
    probs = F.softmax(torch.bmm(q, q.transpose(1, 2)) / scale, dim=-1)  # (B·H, T, T)
    out = torch.bmm(probs, q)                                            # (B·H, T, d_k)
    if bug == "merge-no-transpose":
        return out.contiguous().view(T, B, D)                            # bug: rows are (B·H)
    return out.transpose(0, 1).contiguous().view(T, B, D)                # (T, B, D)


def traced(dims: str, bug: str = "") -> shapetrace.Trace:
    sizes = dict(kv.split("=") for kv in dims.split())
    x = torch.randn(int(sizes["T"]), int(sizes["B"]), int(sizes["D"]))
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        fairseq_style(x, int(sizes["H"]), bug)
    return t


def loud(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity in ("error", "warning")]


def order_note(t) -> str:
    (d,) = [d for d in t.diagnostics if d.kind == "order-of-equal-sizes"]
    return d.message


REASON = "not proven: a finding rests on the order of equal sizes (one reading of the input finds it, another does not)"


def test_sequence_first_attention_at_equal_sizes_has_no_false_error():
    """fairseq's eager attention at B = T = H = 4: read batch first, its scores attend over the batch (main
    said ``✗ attends-over-batch``); read sequence first (what it is), nothing is wrong."""
    t = traced(EQUAL)
    assert loud(t) == []
    assert order_note(t) == (
        "Not reported: attends-over-batch at #4 bmm, tokens-merged-with-features at #1 view. They are found where "
        "the input [4, 4, 32] is read [B, T, D], not where it is read [T, B, D]: B = T = 4, B = H = 4, T = H = 4, "
        "and the names rest on the order of equal sizes, which nothing in the code settles.")
    assert t.report().verdict.line == (
        "? checked 0 of 8 ops that could carry a layout bug; not checked (unnamed axes): #1 view, #2 transpose, "
        "#3 transpose, #4 bmm and 4 more; not proven: names were found from sizes alone, and "
        f"equal sizes are ambiguous; {REASON}; no errors or warnings in what was checked" + UNASKED)


def test_names_the_readings_of_equal_sizes_disagree_on_are_not_shown():
    """The same run's table: main printed the first reading's names, ``[B, T, D]`` for the sequence-first
    input and ``[B, T*H, d_k]`` after the fold, names the other reading ``[T, B, D]`` denies. Now an axis the
    readings name differently shows no name; the names they share (``D``, ``d_k``) stay. The rules still read
    the first reading (``t.events``), whose findings the readings check."""
    t = traced(EQUAL)
    shown = {e.index: ([i.dims for i in e.inputs], [o.dims for o in e.outputs]) for e in t.report().events}
    assert shown[1] == ([(None, None, "D")], [(None, None, "d_k")])                    # view(T, B * H, d_k)
    assert shown[4] == ([(None, None, "d_k"), (None, "d_k", None)], [(None, None, None)])   # bmm: the scores
    assert shown[9] == ([(None, None, "d_k")], [(None, None, "D")])                    # the merge
    assert [o.dims for o in t.events[1].outputs] == [("B", "T*H", "d_k")]              # (what the rules read)


def test_an_input_named_in_its_own_order_keeps_its_names_at_equal_sizes():
    """``shapetrace.name(x, "T B D")`` settles the order: one reading, every name shown, nothing inferred twice."""
    x = torch.randn(4, 4, 32)
    with torch.no_grad(), shapetrace.trace(dims=EQUAL) as t:
        shapetrace.name(x, "T B D")
        fairseq_style(x, 4)
    shown = {e.index: [o.dims for o in e.outputs] for e in t.report().events}
    assert shown[1] == [("T", "B*H", "d_k")] and shown[4] == [("B*H", "T", "T")] and shown[9] == [("T", "B", "D")]
    assert not t.__dict__.get("_readings")
    assert t.report().verdict.mark == "✓"


def test_a_fused_projection_keeps_the_names_both_readings_give():
    """THUDM/ChatGLM2-6B (tests/corpus/public7/chatglm2.py) at B = T = H = 4: its ``query_key_value`` output
    ``[T, B, D+2*D_kv]`` shows the width both readings give and neither of the swapped axes."""
    t = traced_build(chatglm2, "", "B=4 T=4 D=32 H=4 H_kv=2")
    (fused,) = [e for e in t.report().events if e.op == "linear" and e.outputs[0].shape[-1] == 64]
    assert fused.outputs[0].dims == (None, None, "D+2*D_kv")
    assert t.report().verdict.mark == "?"


def test_at_distinct_sizes_nothing_is_read_twice():
    """The twin: at B = 2, T = 6 the input fits one order only; ✓ as on main, no note, every name shown, and
    no other reading inferred (neither for the findings nor for the names)."""
    t = traced(DISTINCT)
    assert [d.kind for d in t.diagnostics] == []
    assert t.report().verdict.line.startswith("✓ checked all 8 ops")
    assert [o.dims for o in t.report().events[1].outputs] == [("T", "B*H", "d_k")]
    assert not t.__dict__.get("_readings")


def test_a_bug_each_order_sees_differently_is_an_error_that_says_so():
    """fairseq's merge without ``transpose(0, 1)`` before ``out_proj`` (tests/corpus/public7/fairseq_mha.py):
    ``mixed-axis`` at distinct sizes; at B = T = H = 4 each order finds another error and none both, so the
    code is wrong whichever is true: ``✗``, each error saying that its names rest on the order and what the
    other reading finds; the warnings only one order makes are left out."""
    t = traced_build(fairseq_mha, "merge-no-transpose", EQUAL)
    assert loud(t) == ["attends-over-batch", "projection-over-tokens"]
    assert all(d.message.endswith(
        " Its names rest on reading the input [4, 4, 32] as [B, T, D] (B = T = 4, B = H = 4, T = H = 4); read "
        "[T, B, D], the code has another bug: tokens-merged-with-features at #22 view.")
        for d in t.diagnostics if d.severity == "error")
    assert order_note(t).startswith("Not reported: tokens-merged-with-features at #4 view, ")
    assert t.report().verdict.line == "✗ 2 errors: the findings above say where and how to fix them"


def test_a_bug_only_one_reading_finds_as_an_error_is_not_one():
    """The same slip without a projection after it (the merged rows are returned): read sequence first it is
    only a warning (tokens merged with features), so the batch-first reading's errors are not reported: ``?``."""
    assert loud(traced(DISTINCT, "merge-no-transpose")) == ["mixed-axis"]
    t = traced(EQUAL, "merge-no-transpose")
    assert loud(t) == []
    assert order_note(t).startswith("Not reported: attends-over-batch at #4 bmm, tokens-merged-with-features at #1 ")
    assert t.report().verdict.line.startswith("? ") and REASON in t.report().verdict.line


def test_a_bug_only_one_order_sees_is_not_reported_and_the_verdict_says_why():
    """The scores scaled by 1/√D (fairseq scales by ``head_dim**-0.5``): a warning read sequence first; read
    batch first the scores attend over the batch, an error the other order does not make: nothing is
    reported, and the verdict says why it is ``?`` (main: ``✗ attends-over-batch``)."""
    assert loud(traced(DISTINCT, "scale-by-D")) == ["scale-not-head-dim"]
    t = traced(EQUAL, "scale-by-D")
    assert loud(t) == []
    assert order_note(t).startswith("Not reported: attends-over-batch at #4 bmm, tokens-merged-with-features at #1 "
                                    "view. They are found where the input [4, 4, 32] is read [B, T, D], not where "
                                    "it is read [T, B, D]")
    assert t.report().verdict.line.startswith("? ") and REASON in t.report().verdict.line


def test_a_bug_every_order_sees_is_kept():
    """THUDM/ChatGLM2-6B's multi-query groups tiled (``repeat``) instead of widened per group: the same
    ``gqa-head-order`` on the same line whichever order the sequence-first input is read in, so it stays
    ``✗`` at B = T = H = 4, and the batch-first reading's false ``attends-over-batch`` is gone (main had both)."""
    t = traced_build(chatglm2, "groups-tiled", "B=4 T=4 D=32 H=4 H_kv=2")
    assert loud(t) == ["gqa-head-order"]
    assert "attends-over-batch" in order_note(t)


def test_every_seed_that_fits_an_input_is_a_reading():
    from shapetrace.engine.readings import ambiguous_inputs, other_readings

    equal, distinct = traced(EQUAL), traced(DISTINCT)
    (choice,) = ambiguous_inputs(equal._inferred())
    assert choice[1] == [("B", "T", "D"), ("T", "B", "D")]
    assert other_readings([choice]) == [{choice[0]: ("T", "B", "D")}]
    assert ambiguous_inputs(distinct._inferred()) == []


def test_a_run_without_findings_is_read_once(monkeypatch):
    """The cost: a correct batch-first run at B = T = H = 4 (nanoGPT's ``CausalSelfAttention`` layout) has no
    finding, so no other reading is inferred."""
    from shapetrace.engine import readings

    def never(*_):
        raise AssertionError("a second reading was inferred")

    monkeypatch.setattr(readings, "_findings", never)
    x = torch.randn(4, 4, 32)
    with torch.no_grad(), shapetrace.trace(dims=EQUAL) as t:
        q = x.view(4, 4, 4, 8).transpose(1, 2)                           # (B, H, T, d_k)
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True)      # (B, H, T, d_k)
        y.transpose(1, 2).contiguous().view(4, 4, 32)                    # (B, T, D)
    assert loud(t) == [] and [d.kind for d in t.diagnostics] == ["ambiguous-sizes"]
