"""``shapetrace compare --backward``: each implementation's backward of the output's sum on the same weights and
input: what autograd keeps (checked against saved_tensors_hooks on an untraced twin) and the input's gradient
against the reference's (checked against torch's own)."""

from __future__ import annotations

import json

import torch
from conftest import cli_in_process

SMALL = ("--d-model", "16", "--heads", "2", "--seq-len", "4", "--batch", "2")


def _kept_by_torch(model, x) -> int:
    """Bytes of the distinct storages autograd saves for ``model(x)``, parameters left out, counted untraced."""
    storages: dict[int, int] = {}
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x, None, None)
    del out
    return sum(storages.values())


def test_compare_backward_reports_what_each_implementation_keeps_and_its_input_gradient():
    from shapetrace.attention import variants
    from shapetrace.attention.config import AttentionConfig

    proc = cli_in_process("compare", "--backward", "--json", *SMALL)
    assert proc.returncode == 0, proc.stderr
    rows = {r["impl"]: r for r in json.loads(proc.stdout)["rows"]}
    assert set(rows) == {"manual", "einops", "fused-qkv", "torch", "sdpa"}
    assert all(r["backward"]["dx_agrees"] for r in rows.values())
    config = AttentionConfig(d_model=16, heads=2, seq_len=4, batch=2)
    ref, inputs = variants.build_reference(config, "cpu")
    for impl in ("manual", "torch", "sdpa"):
        model = variants.build_impl(config, impl, ref, "cpu")
        assert rows[impl]["backward"]["kept_bytes"] == _kept_by_torch(model, inputs["x"]), impl
    # the softmax's [B, H, T, T] weights, 2·2·4·4 floats, kept by the manual code; SDPA's CPU kernel keeps none
    assert (rows["manual"]["backward"]["weights_bytes"], rows["sdpa"]["backward"]["weights_bytes"]) == (256, 0)


def test_compare_backward_table_view():
    proc = cli_in_process("compare", "--backward", *SMALL, "--width", "120")
    assert proc.returncode == 0, proc.stderr
    out = [line.rstrip() for line in proc.stdout.splitlines()]
    head = next(i for i, line in enumerate(out) if line.startswith("backward "))
    assert out[head].split() == ["backward", "autograd", "keeps", "attention", "weights", "max", "|dx", "diff|",
                                 "vs", "manual"]
    assert out[head + 1].startswith("manual") and out[head + 1].endswith("0.0e+00 ✓")


def test_compare_without_backward_has_no_backward_rows():
    rows = json.loads(cli_in_process("compare", "--json", *SMALL).stdout)["rows"]
    assert all("backward" not in r for r in rows)
