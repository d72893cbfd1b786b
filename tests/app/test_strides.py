"""`shapetrace strides`: the safe chain parser, the engine against torch, failures explained, CLI."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import cli_forked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from layout_chains import chains, factorisations

from shapetrace.app.chain import META_LIMIT, parse_chain, parse_shape
from shapetrace.app.strides import run_chain
from shapetrace.engine.events import TensorInfo
from shapetrace.engine.viewfail import explain_view_error, resolve_shape, view_breaks
from shapetrace.errors import UsageError

FAILING = ("2x6x8x64", "transpose(1, 2).view(2, 6, 512)")
TORCH_VIEW_ERROR = "view size is not compatible with input tensor's size and stride"


# -- parser ------------------------------------------------------------------

@pytest.mark.parametrize("chain,refused", [
    ("__import__('os')", "'__import__'"),
    ("view(2, 6).__class__", "attribute '__class__'"),
    ("transpose(0, 1).data", "attribute 'data'"),
    ("view(2, open('f'))", 'argument "open(\'f\')"'),
    ("view('a')", "argument 'a'"),
    ("view(2 ** 40)", "argument '2 ** 40'"),
    ("torch.transpose(x, 0, 1)", "'torch'"),
    ("view(2, 6) + 1", "'view(2, 6) + 1'"),
    ("view(lambda: 0)", "argument 'lambda: 0'"),
    ("view(*sizes)", "argument '*sizes'"),
    ("cuda()", "'cuda'"),
    ("view(B, Q)", "name 'Q'"),
])
def test_parser_refuses_anything_outside_the_whitelist(chain, refused):
    with pytest.raises(UsageError) as info:
        parse_chain(chain, {"B": 2})
    assert refused in str(info.value)


def test_parser_reads_methods_indexing_arithmetic_and_names():
    steps = parse_chain("x.view(B, T, 8, D // 8)[0, :, 1:3, ...].mT.permute(2, 0, 1).flatten(0, -1)",
                        {"B": 2, "T": 6, "D": 512})
    assert [(s.method, s.args) for s in steps] == [
        ("view", (2, 6, 8, 64)), ("__getitem__", ((0, slice(None), slice(1, 3), Ellipsis),)),
        ("mT", ()), ("permute", (2, 0, 1)), ("flatten", (0, -1))]
    assert [s.text for s in steps][:2] == ["view(B, T, 8, D // 8)", "[0, :, 1:3, ...]"]


@pytest.mark.parametrize("text,shape", [("2x6x512", (2, 6, 512)), ("2,6,512", (2, 6, 512)),
                                        ("(2, 6, 512)", (2, 6, 512)), ("7", (7,))])
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["", "2x0x3", "2xax3", "-2x3"])
def test_parse_shape_refuses(text):
    with pytest.raises(UsageError):
        parse_shape(text)


# -- engine against torch ------------------------------------------------------

def test_every_step_matches_torch_and_names_follow():
    run = run_chain("2x6x512", "view(2, 6, 8, 64).transpose(1, 2).contiguous().view(2, 8, 6*64)", heads=8)
    x = torch.arange(6144.).view(2, 6, 512)
    expected = [x, x.view(2, 6, 8, 64)]
    expected += [expected[-1].transpose(1, 2)]
    expected += [expected[-1].contiguous()]
    expected += [expected[-1].view(2, 8, 384)]
    for step, t in zip(run.steps, expected, strict=True):
        assert (step.info.shape, step.info.stride, step.info.contiguous) == (tuple(t.shape), t.stride(),
                                                                             t.is_contiguous())
    assert [s.info.dims for s in run.steps] == [("B", "T", "D"), ("B", "T", "H", "d_k"), ("B", "H", "T", "d_k"),
                                                ("B", "H", "T", "d_k"), ("B", "H", "T*d_k")]
    assert [(s.view, s.copy_bytes) for s in run.steps[1:]] == [(True, 0), (True, 0), (False, 24576), (True, 0)]
    assert run.device == "cpu" and not run.failed


def test_huge_shapes_use_the_meta_device():
    run = run_chain("4096x4096x4096", "transpose(0, 2).reshape(-1, 64)")
    assert 4096 ** 3 > META_LIMIT and run.device == "meta"
    t = torch.empty(4096, 4096, 4096, device="meta").transpose(0, 2)
    assert run.steps[1].info.stride == t.stride()
    assert run.steps[2].info.shape == (4096 ** 3 // 64, 64) and run.steps[2].copy_bytes == 4 * 4096 ** 3
    assert run_chain("64x64", "mT").device == "cpu"


def test_failing_view_keeps_the_steps_before_and_explains():
    run = run_chain(*FAILING)
    assert run.failed and [s.code for s in run.steps] == ["start", "transpose(1, 2)", "view(2, 6, 512)"]
    last = run.steps[-1]
    assert last.info is None and TORCH_VIEW_ERROR in last.error
    assert "has to merge H, T and d_k (8 × 6 × 64 = 3,072 elements)" in last.explanation
    assert "H → T: stride(H) = 64, but size(T) × stride(T) = 6 × 512 = 3,072" in last.explanation
    # applied to this layout, the copying fixes would mix H and T: refused (tests/engine/test_verified_fixes.py)
    assert "fix 1" not in last.explanation and "fix 2" not in last.explanation
    assert "but they give [B, !H·T, !H·T·d_k]: axis 1 takes pieces of H and T" in last.explanation
    assert ".transpose(1, 2).reshape(2, 6, 512) gives [B, T, H·d_k]" in last.explanation


def test_the_64_and_384_case_and_no_trap_when_reshape_is_right():
    run = run_chain("2x8x6x64", "transpose(1, 2).view(2, 6, 512)", dims="B,H,T,d_k")
    text = run.steps[-1].explanation
    assert "H → d_k: stride(H) = 384, but size(d_k) × stride(d_k) = 64 × 1 = 64" in text
    assert "not a fix" not in text and "fix 2: .reshape(2, 6, 512)" in text  # [B, T, D]: right order, a copy


def test_reshape_trap_is_taught():
    run = run_chain("2x6x8x64", "transpose(1, 2).reshape(2, 6, 512)")
    notes = run.steps[-1].notes
    assert notes[0].startswith("reshape copied 24 KiB without saying so")
    assert notes[1].startswith("error mixed-axis: step 2 (reshape) turns [B=2, H=8, T=6, d_k=64]")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.data())
def test_view_breaks_agree_with_torch(case, data):
    _base, t, _heads, _dims = case
    target = data.draw(st.sampled_from(factorisations(t.numel()) if t.numel() > 1 else [(1,)]))
    info = TensorInfo(tuple(t.shape), t.stride(), t.storage_offset(), "float32", t.is_contiguous(),
                      (None,) * t.dim(), nbytes=t.numel() * 4)
    try:
        t.view(target)
        works = True
    except RuntimeError:
        works = False
    assert (view_breaks(info, target) == []) == works, (t.shape, t.stride(), target)


def test_helpers():
    assert resolve_shape(24, (2, -1, 4)) == (2, 3, 4) and resolve_shape(24, (5, -1)) is None
    import torch

    import shapetrace
    from shapetrace.engine.viewfail import requested_shape

    with shapetrace.trace() as t:   # the asked-for shape is recorded at call time, -1 included
        torch.zeros(2, 6, 4).view(2, -1)
        torch.zeros(2, 6, 4).reshape((4, 12))
    assert [requested_shape(e) for e in t.events] == [(2, -1), (4, 12)]
    info = TensorInfo((2, 3), (1, 2), 0, "float32", False, ("T", "D"), nbytes=24)
    assert "different number of elements" in explain_view_error(info, (5,))
    assert explain_view_error(info, (3, 2)) != ""


# -- CLI -----------------------------------------------------------------------

def test_cli_failing_chain_exits_1_with_partial_steps(cli):
    result = cli("strides", *FAILING, "--width", "100")
    assert result.exit_code == 1
    out = result.output
    assert "step 1 · .transpose(1, 2)" in out and "strides (3072, 64, 512, 1) · view (no copy)" in out
    assert "✗ raised RuntimeError: view size is not compatible" in out
    assert "not a fix: .contiguous().view(2, 6, 512) and .reshape(2, 6, 512) would run" in out
    assert "2 steps · 1 view · 0 copies (0 B) · failed at step 2" in out


def test_cli_json_per_step(cli):
    result = cli("strides", "2x6x512", "view(B, T, H, d_k).transpose(1, 2).contiguous()",
                 "--dims", "B,T,D", "--heads", "8", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    keys = {"step", "code", "shape", "stride", "storage_offset", "contiguous", "view", "copy_bytes", "dims",
            "error", "explanation", "notes"}
    assert all(set(s) == keys for s in data["steps"])
    assert [s["stride"] for s in data["steps"]] == [[3072, 512, 1], [3072, 512, 64, 1], [3072, 64, 512, 1],
                                                    [3072, 384, 64, 1]]
    assert [s["copy_bytes"] for s in data["steps"]] == [0, 0, 0, 24576]
    assert data["steps"][2]["dims"] == ["B", "H", "T", "d_k"] and data["ok"] is True


def test_cli_json_failure(cli):
    result = cli("strides", *FAILING, "--json")
    data = json.loads(result.output)
    assert result.exit_code == 1 and data["ok"] is False
    assert data["steps"][-1]["shape"] is None and TORCH_VIEW_ERROR in data["steps"][-1]["error"]


@pytest.mark.parametrize("args,message", [
    (("2x6x512", "__import__('os')"), "refused '__import__'"),
    (("2x6x512", "view(2, 6, 8, 64)", "--dims", "B,T"), "gives 2 names for a shape with 3 axes"),
    (("2x6x512", "view(2, 6, 8, 64)", "--heads", "7"), "--heads 7 does not divide D=512"),
    (("2xq", "mT"), "cannot read shape"),
])
def test_cli_usage_errors_exit_2(cli, args, message):
    result = cli("strides", *args)
    assert result.exit_code == 2
    assert message in result.output


def test_subprocess_no_color_failing_chain():
    proc = cli_forked("strides", *FAILING, env={"NO_COLOR": "1"})
    assert proc.returncode == 1 and proc.stderr == ""
    assert "\x1b[" not in proc.stdout
    assert "│A 0,0,0,:│B 0,1,0,:│" in proc.stdout  # letters carry the key without colour
    assert "The strides do not chain (64 ≠ 3,072)" in proc.stdout


def test_strides_help_does_not_import_torch():
    import subprocess
    import sys

    from conftest import ROOT

    code = ("from shapetrace.cli.app import app\ntry:\n    app(['strides', '--help'])\nexcept SystemExit:\n    pass\n"
            "import sys; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False" and "SHAPE" in out.stdout


def test_heads_are_inferred_from_the_first_split_when_not_given():
    run = run_chain("2x6x512", "view(2, 6, 8, 64).transpose(1, 2).contiguous().view(2, 8, 6*64)")
    assert run.trace.dims["H"] == 8 and run.trace.dims["d_k"] == 64
    assert run.steps[2].info.dims == ("B", "H", "T", "d_k")
    assert [d.severity for d in run.trace.diagnostics] == ["warning"]


def test_exit_codes_follow_run_ok_warning_and_error(cli):
    ok = cli("strides", "2x6x512", "view(2, 6, 8, 64).transpose(1, 2)")
    warned = cli("strides", "2x6x512", "view(2, 6, 8, 64).transpose(1, 2).contiguous().view(2, 8, 6*64)")
    trapped = cli("strides", "2x6x8x64", "transpose(1, 2).reshape(2, 6, 512)")
    assert (ok.exit_code, warned.exit_code, trapped.exit_code) == (0, 0, 1)
    assert "mixed-axis" in trapped.output
