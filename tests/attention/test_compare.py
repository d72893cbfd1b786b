"""shapetrace compare: every implementation on the same weights agrees with the reference;
counts come from each trace; the op-by-op diff accounts for every op."""

from __future__ import annotations

import json

import pytest

from shapetrace.app.compare import TOLERANCE, compare_impls, diff_events
from shapetrace.attention.config import AttentionConfig as C
from shapetrace.engine.summary import stats


@pytest.mark.parametrize("kw, skipped", [
    ({}, set()),
    ({"causal": True, "mask": "padding", "pad": (0, 2)}, set()),
    ({"kv_len": 9}, {"fused-qkv"}),
    ({"kv_heads": 2}, {"fused-qkv", "torch"}),
])
def test_every_impl_agrees_with_the_reference(kw, skipped):
    rows, device = compare_impls(C(d_model=64, heads=4, seq_len=5, **kw))
    assert device == "cpu"
    assert [r.impl for r in rows] == ["manual", "einops", "fused-qkv", "torch", "sdpa"]
    assert {r.impl for r in rows if r.skipped} == skipped
    for r in rows:
        if r.skipped:
            continue
        assert r.max_diff is not None and r.max_diff <= TOLERANCE, r
        assert r.errors == 0
        s = stats(r.trace.events)
        hidden = [c.nbytes for e in r.trace.events for c in e.hidden_copies]
        assert (r.hidden_copies, r.hidden_bytes) == (len(hidden), sum(hidden))
        assert (r.ops, r.views, r.copies, r.copy_bytes) == (s["ops"], s["views"], s["copies"] + len(hidden),
                                                            s["copy_bytes"] + sum(hidden))
        assert r.ops == len(r.trace.events)
    manual = rows[0]
    assert manual.max_diff == 0.0


def test_counts_differ_where_the_code_differs():
    rows = {r.impl: r for r in compare_impls(C())[0]}
    assert rows["sdpa"].ops < rows["manual"].ops < rows["torch"].ops   # torch's own MHA is opened up
    assert [e.op for e in rows["sdpa"].trace.events].count("scaled_dot_product_attention") == 1
    torch_ops = [e.op for e in rows["torch"].trace.events]
    assert torch_ops.count("bmm") == 2 and torch_ops.count("softmax") == 1
    assert "multi_head_attention_forward" not in torch_ops
    assert [e.op for e in rows["fused-qkv"].trace.events].count("split") == 1
    # the code's .contiguous() (24 KiB) and the three operands matmul clones for bmm (72 KiB)
    assert rows["manual"].copy_bytes == 4 * 2 * 6 * 512 * 4
    assert (rows["manual"].hidden_copies, rows["manual"].hidden_bytes) == (3, 3 * 2 * 6 * 512 * 4)


def test_diff_accounts_for_every_op():
    rows = {r.impl: r for r in compare_impls(C())[0]}
    a, b = rows["manual"].trace.events, rows["einops"].trace.events
    diff = diff_events(a, b)
    assert [e for _t, e, _ in diff if e is not None] == a
    assert [e for _t, _, e in diff if e is not None] == b
    tags = [(t, x and x.op, y and y.op) for t, x, y in diff]
    assert tags[0] == ("same", "linear", "linear")
    assert ("changed", "view", "reshape") in tags and ("changed", "transpose", "permute") in tags
    same = [t for t in tags if t[0] == "same"]
    assert all(x == y for _t, x, y in same)


def test_meta_compare_has_counts_but_no_values():
    rows, device = compare_impls(C(d_model=64, heads=4), ["manual", "sdpa"], max_bytes=1000)
    assert device == "meta" and all(r.max_diff is None and r.ops > 0 for r in rows)


def test_cli_compare(cli):
    res = cli("compare", "--width", "80", "--diff", "manual", "einops")
    assert res.exit_code == 0, res.output
    assert "✓ all 5 implementations agree" in res.output
    assert "op by op: manual (-) vs einops (+)" in res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80
    res = cli("compare", "--json", "--kv-heads", "2")
    data = json.loads(res.output)
    assert {r["impl"]: r["skipped"] is not None for r in data["rows"]} == {
        "manual": False, "einops": False, "fused-qkv": True, "torch": True, "sdpa": False}


def test_cli_compare_bad_impl_is_usage_error(cli):
    res = cli("compare", "--diff", "manual", "flash")
    assert res.exit_code == 2
    res = cli("compare", "--kv-len", "9", "--diff", "manual", "fused-qkv")
    assert res.exit_code == 2


def test_compare_counts_hidden_copies_and_the_readme_table_is_current(cli):
    """The matmuls' clones are counted (and said to be torch's); the README's table is a real run's."""
    from conftest import ROOT

    out = cli("compare", "--width", "200").output
    assert ("copies include torch's own, not the code's (operands a batched matmul clones for bmm): manual 3 "
            "(72 KiB), einops 3 (72 KiB), fused-qkv 3 (72 KiB)") in out
    live = {line.split()[0]: line.split()[:6] for line in out.splitlines() if line[:1].isalpha() and "KiB" in line}
    assert live["manual"] == ["manual", "17", "9", "4", "96", "KiB"]
    readme = (ROOT / "README.md").read_text()
    block = readme.split("`shapetrace compare` runs every implementation on the same weights and input:")[1]
    block = block.split("```text\n")[1].split("```")[0]
    pasted = {line.split()[0]: line.split()[:6] for line in block.splitlines() if line.split()
              and line.split()[0] in live}
    assert pasted == live
