"""``run --decode N`` (a prefill, then one-token steps with a KV cache) and ``run --image SIZE --patch P``
(conv patches and a class token): exact names, shapes and strides, no false diagnostic (T = H and
N = H included), their catalogue bugs flagged as errors, decode steps folded, bad options in one line."""

from __future__ import annotations

import json

import pytest

from shapetrace.app.session import trace_variant
from shapetrace.app.steps import fold_steps, split_steps
from shapetrace.attention.catalogue import BREAKS, CATALOGUE
from shapetrace.attention.config import AttentionConfig as C
from shapetrace.errors import UsageError


def events_of(run, op):
    return [e for e in run.trace.events if e.op == op]


def errors(run):
    return [d for d in run.trace.diagnostics if d.severity == "error"]


def not_notes(run):
    return [d for d in run.trace.diagnostics if d.severity != "note"]


def named(t):
    return list(zip(t.dims, t.shape))


# ---------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------

def test_decode_names_the_step_token_and_the_growing_cache():
    run = trace_variant(C(d_model=64, heads=8, decode=3))
    assert not_notes(run) == [] and run.trace.exception is None
    starts = run.header["steps"]
    assert len(starts) == 3
    cats = events_of(run, "cat")
    assert [c.output.dims for c in cats] == [("B", "H", f"T+{s}", "d_k") for s in (1, 1, 2, 2, 3, 3)]
    assert [c.output.shape for c in cats] == [(2, 8, 6 + s, 8) for s in (1, 1, 2, 2, 3, 3)]
    assert named(cats[0].inputs[0]) == [("B", 2), ("H", 8), ("T", 6), ("d_k", 8)]
    assert named(cats[0].inputs[1]) == [("B", 2), ("H", 8), ("T[-1:]", 1), ("d_k", 8)]
    assert cats[0].output.stride == (448, 56, 8, 1) and not cats[0].view
    scores = [e for e in events_of(run, "matmul") if e.output.dims[-1] and e.output.dims[-1].startswith("T")]
    assert [s.output.dims for s in scores][-3:] == [("B", "H", "T[-1:]", f"T+{s}") for s in (1, 2, 3)]
    assert scores[-1].output.shape == (2, 8, 1, 9)
    step_q = events_of(run, "transpose")[[e.index for e in events_of(run, "transpose")].index(starts[0] + 2)]
    assert named(step_q.output) == [("B", 2), ("H", 8), ("T[-1:]", 1), ("d_k", 8)]


def test_decode_prefill_is_causal_and_a_step_has_no_mask():
    run = trace_variant(C(d_model=64, heads=8, decode=2))
    starts = run.header["steps"]
    fills = events_of(run, "masked_fill")
    assert len(fills) == 1 and fills[0].index < starts[0]
    assert named(fills[0].output) == [("B", 2), ("H", 8), ("T", 6), ("T", 6)]
    assert run.config.causal


@pytest.mark.parametrize("seq_len,heads", [(8, 8), (4, 4), (6, 8)], ids=["T=H=8", "T=H=4", "default"])
def test_decode_names_stay_right_when_T_equals_H(seq_len, heads):
    run = trace_variant(C(d_model=64, heads=heads, seq_len=seq_len, decode=2))
    assert not_notes(run) == []
    for e in run.trace.events:
        for t in (*e.inputs, *e.outputs):
            if len(t.shape) == 4:
                assert None not in t.dims, (e.index, e.op, t.dims)
                assert t.dims[1] in ("H", "T", "T[-1:]"), (e.index, e.op, t.dims)
    cat = events_of(run, "cat")[-1]
    assert named(cat.output) == [("B", 2), ("H", heads), ("T+2", seq_len + 2), ("d_k", 64 // heads)]


def test_decode_gqa_cache_is_H_kv_wide_and_sdpa_names_match():
    run = trace_variant(C(d_model=64, heads=8, kv_heads=2, decode=2, impl="sdpa"))
    assert not_notes(run) == []
    cats = events_of(run, "cat")
    assert named(cats[-1].output) == [("B", 2), ("H_kv", 2), ("T+2", 8), ("d_k", 8)]
    sdpa = events_of(run, "scaled_dot_product_attention")
    assert len(sdpa) == 3 and sdpa[0].params.get("is_causal") and not sdpa[1].params.get("is_causal")
    assert named(sdpa[-1].inputs[0]) == [("B", 2), ("H", 8), ("T[-1:]", 1), ("d_k", 8)]
    assert named(sdpa[-1].inputs[1]) == [("B", 2), ("H", 8), ("T+2", 8), ("d_k", 8)]
    assert any("H_kv = 2 heads wide" in n for n in run.notes)


def test_decode_matches_the_full_causal_forward():
    """The cached run computes what one causal forward over all T+N tokens computes at its last position."""
    import torch

    from shapetrace.app.shapes import decode, decode_models

    config = C(d_model=32, heads=4, decode=3, seq_len=5)
    model, _, x = decode_models(config, "cpu")
    with torch.no_grad():
        y, cache = model(x)
        inputs = [x]
        nxt = model.last_token(y)
        for _ in range(3):
            inputs.append(nxt)
            nxt, cache = model(nxt, cache)
        full, _ = model(torch.cat(inputs, dim=1))
        last, _ = decode(model, x, 3)
    assert torch.allclose(full[:, -1:], last, atol=1e-5)
    assert cache[0].shape == (2, 4, 8, 8)


def test_decode_steps_fold_after_the_first():
    run = trace_variant(C(d_model=64, heads=8, decode=3))
    events, starts = run.trace.events, run.header["steps"]
    folds = fold_steps(events, starts)
    assert len(folds) == 1
    fold = folds[0]
    assert [s.number for s in fold.steps] == [2, 3] and fold.original.number == 1
    assert fold.caches == ("T+2", "T+3")
    assert fold.sentence == "steps 2-3: the same 19 ops as step 1, the cache one token longer each step: T+2, T+3"
    prefill, steps = split_steps(events, starts)
    assert prefill[-1].op == "contiguous" and [len(s.events) for s in steps] == [19, 19, 19]
    # a diagnosed op keeps its step on the table
    assert fold_steps(events, starts, keep={starts[2] + 3}) == [fold_steps(events, starts)[0].__class__(
        (steps[1],), steps[0])]


def test_decode_table_shows_prefill_first_step_and_folds_the_rest(cli):
    res = cli("run", "--decode", "3", "--d-model", "64", "--width", "100")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "prefill" in lines and "step 1" in lines and "step 2" not in lines
    assert "40-77 steps 2-3: the same 19 ops as step 1, the cache one token longer each step: T+2, T+3" in lines
    assert max(len(line) for line in lines) <= 100
    full = cli("run", "--decode", "3", "--d-model", "64", "--width", "100", "--all").output.splitlines()
    assert "step 3" in full and not any("steps 2-3" in line for line in full)


def test_decode_json(cli):
    res = cli("run", "--decode", "3", "--json")
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["diagnostics"] == []
    assert data["variant"]["decode"] == {"prefill": [0, 20], "steps": [[21, 39], [40, 58], [59, 77]],
                                         "cache": ["T+1", "T+2", "T+3"]}
    assert data["variant"]["config"]["decode"] == 3
    heads = [t for e in data["events"] for t in e["inputs"] + [e["output"]] if t and len(t["shape"]) == 4]
    assert heads and all(None not in t["dims"] for t in heads)
    assert {t["dims"][2] for t in heads} >= {"T", "T[-1:]", "T+1", "T+2", "T+3"}


# ---------------------------------------------------------------------------
# images
# ---------------------------------------------------------------------------

def test_image_names_patches_class_token_and_heads():
    run = trace_variant(C(d_model=64, heads=8, image=32, patch=8))
    assert not_notes(run) == [] and run.trace.exception is None
    assert run.config.seq_len == 17
    conv, flat = events_of(run, "conv2d")[0], events_of(run, "flatten")[0]
    assert named(conv.output) == [("B", 2), ("D", 64), ("Hp", 4), ("Wp", 4)] and conv.output.stride == (1024, 16, 4, 1)
    assert named(flat.output) == [("B", 2), ("D", 64), ("N", 16)] and flat.view
    cat = events_of(run, "cat")[0]
    assert named(cat.output) == [("B", 2), ("1+N", 17), ("D", 64)] and cat.output.stride == (1088, 64, 1)
    scores = events_of(run, "matmul")[0]
    assert named(scores.output) == [("B", 2), ("H", 8), ("1+N", 17), ("1+N", 17)]
    q = events_of(run, "transpose")[1]
    assert named(q.output) == [("B", 2), ("H", 8), ("1+N", 17), ("d_k", 8)] and q.output.stride == (1088, 8, 64, 1)
    assert run.heat is not None


@pytest.mark.parametrize("d_model,heads,image,patch", [(32, 16, 16, 4), (16, 4, 8, 2), (48, 3, 32, 8)],
                         ids=["N=H=16", "N=D=16", "vit-tiny-like"])
def test_image_names_stay_right_at_equal_sizes(d_model, heads, image, patch):
    run = trace_variant(C(d_model=d_model, heads=heads, image=image, patch=patch))
    assert not_notes(run) == []
    n = (image // patch) ** 2
    q = events_of(run, "transpose")[1]
    assert named(q.output) == [("B", 2), ("H", heads), ("1+N", 1 + n), ("d_k", d_model // heads)]
    merged = events_of(run, "view")[-1]
    assert named(merged.output) == [("B", 2), ("1+N", 1 + n), ("D", d_model)]


def test_image_sdpa_gqa_and_channels():
    run = trace_variant(C(d_model=64, heads=8, kv_heads=4, image=32, patch=8, channels=1, impl="sdpa"))
    assert not_notes(run) == []
    assert events_of(run, "conv2d")[0].inputs[0].shape == (2, 1, 32, 32)
    sdpa = events_of(run, "scaled_dot_product_attention")[0]
    assert named(sdpa.inputs[0]) == [("B", 2), ("H", 8), ("1+N", 17), ("d_k", 8)]
    assert not sdpa.params.get("is_causal")


def test_image_json(cli):
    res = cli("run", "--image", "32", "--patch", "8", "--json")
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["diagnostics"] == []
    assert data["variant"]["image"] == {"size": 32, "patch": 8, "channels": 3, "grid": [4, 4], "patches": 16,
                                        "tokens": 17}
    heads = [t for e in data["events"] for t in e["inputs"] + [e["output"]]
             if t and len(t["shape"]) == 4 and e["op"] != "conv2d"]
    assert heads and all(None not in t["dims"] for t in heads)
    assert all(17 in t["shape"] for t in heads if "H" in t["dims"])


# ---------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------

NEW_BREAKS = {"cache-wrong-axis": "decode", "causal-at-decode": "decode", "patches-without-permute": "image",
              "cls-token-wrong-axis": "image"}


def test_new_breaks_are_whole_model_breaks_of_their_shape():
    for name, shape in NEW_BREAKS.items():
        assert name in BREAKS and BREAKS[name].shape == shape and BREAKS[name].severity == "error"
        assert CATALOGUE[name].to_dict()["shape"] == shape
    assert BREAKS["causal-at-decode"].impl == "sdpa"


@pytest.mark.parametrize("size", [(2, 6, 512, 8), (2, 8, 64, 8), (3, 4, 64, 4)], ids=["default", "T=H", "small"])
@pytest.mark.parametrize("name", list(NEW_BREAKS))
def test_each_new_break_is_flagged_as_an_error(name, size):
    B, T, D, H = size
    run = trace_variant(C(batch=B, seq_len=T, d_model=D, heads=H, broken=name), compare=False)
    assert {d.kind for d in errors(run)} & set(BREAKS[name].kinds), run.trace.diagnostics
    assert run.config.decode if NEW_BREAKS[name] == "decode" else run.config.image


def test_cache_wrong_axis_is_explained_by_names():
    run = trace_variant(C(d_model=64, broken="cache-wrong-axis"))
    assert type(run.trace.exception).__name__ == "RuntimeError"
    d = next(d for d in errors(run) if d.kind == "cat-sizes-mismatch")
    bad = run.trace.events[d.event]
    assert bad.op == "cat" and bad.error and d.event == run.header["steps"][0] + 9
    assert ("cat #30 raised: it joins [B=2, H=8, T=6, d_k=8] and [B=2, H=8, T[-1:]=1, d_k=8] along axis 1 (H), "
            "so every other axis must have the same size in each part, but axis 2 holds T=6 in the first and "
            "T[-1:]=1 in the second.") in d.message
    assert "dim=2" in d.fix
    assert run.comparison["raised"].startswith("RuntimeError: Sizes of tensors must match")


def test_causal_at_decode_is_flagged_at_the_first_step_and_differs_from_the_reference():
    run = trace_variant(C(d_model=64, broken="causal-at-decode", decode=3))
    found = [d for d in errors(run) if d.kind == "causal-mask-misaligned"]
    starts = run.header["steps"]
    assert len(found) == 1 and starts[0] <= found[0].event < starts[1]   # said once, at the first step
    assert run.trace.events[found[0].event].op == "scaled_dot_product_attention"
    assert "the one query sees key 0 only" in found[0].message
    assert run.comparison["max_diff"] > 0.1
    folds = fold_steps(run.trace.events, starts, keep={found[0].event})
    assert [[s.number for s in f.steps] for f in folds] == [[2, 3]]


def test_patches_without_permute_is_a_mixed_axis_at_the_view():
    run = trace_variant(C(d_model=64, heads=8, broken="patches-without-permute"))
    d = next(d for d in errors(run) if d.kind == "mixed-axis")
    view = run.trace.events[d.event]
    assert view.op == "view" and named(view.inputs[0]) == [("B", 2), ("D", 64), ("Hp", 4), ("Wp", 4)]
    assert view.output.shape == (2, 16, 64) and view.output.dims[1:] != ("N", "D")
    assert d.fix.startswith("Move the features last before reading patches as tokens: x.flatten(2).transpose(1, 2)")
    assert run.comparison["max_diff"] > 0


def test_cls_token_wrong_axis_is_explained_by_names():
    run = trace_variant(C(d_model=64, broken="cls-token-wrong-axis"))
    d = next(d for d in errors(run) if d.kind == "cat-sizes-mismatch")
    assert "along axis 0 (B)" in d.message and "size 1 in the first and N=16 in the second" in d.message
    assert "dim=1" in d.fix


def test_break_list_shows_the_new_breaks(cli):
    res = cli("run", "--break", "list", "--width", "100")
    assert res.exit_code == 0
    for name in NEW_BREAKS:
        assert name in res.output
    data = json.loads(cli("run", "--break", "list", "--json").output)
    assert {b["name"]: b["shape"] for b in data if b["name"] in NEW_BREAKS} == NEW_BREAKS


@pytest.mark.parametrize("width", ["80", "100"])
def test_a_new_break_run_exits_1_within_the_width(cli, width):
    res = cli("run", "--break", "cache-wrong-axis", "--width", width)
    assert res.exit_code == 1
    assert "✗ error cat-sizes-mismatch" in res.output
    assert max(len(line) for line in res.output.splitlines()) <= int(width)


# ---------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("options,message", [
    ({"decode": 0}, "--decode must be a whole number of steps from 1 to 64, got 0"),
    ({"decode": 65}, "--decode must be a whole number of steps from 1 to 64, got 65"),
    ({"decode": 2, "kv_len": 4}, "--decode cannot be combined with --kv-len"),
    ({"decode": 2, "mask": "padding"}, "--decode cannot be combined with --mask padding"),
    ({"decode": 2, "dropout": 0.1}, "--decode cannot be combined with --dropout"),
    ({"decode": 2, "impl": "torch"}, "--decode runs with --impl manual or sdpa, not torch"),
    ({"decode": 2, "image": 32, "patch": 8}, "--decode cannot be combined with --image"),
    ({"image": 32}, "--image 32 needs --patch P"),
    ({"patch": 8}, "--patch needs --image SIZE"),
    ({"channels": 1}, "--channels needs --image SIZE"),
    ({"image": 30, "patch": 8}, "--patch 8 does not divide --image 30"),
    ({"image": 32, "patch": 8, "causal": True}, "--image cannot be combined with --causal"),
    ({"image": 32, "patch": 8, "channels": 0}, "--channels must be a whole number of at least 1, got 0"),
    ({"image": 32, "patch": 8, "impl": "einops"}, "--image runs with --impl manual or sdpa, not einops"),
    ({"broken": "cache-wrong-axis", "image": 32, "patch": 8}, "a bug of --decode runs, not of --image runs"),
    ({"broken": "skip-transpose", "decode": 2}, "a bug of the plain forward pass; drop --decode"),
    ({"broken": "patches-without-permute", "impl": "sdpa"}, "--break variants are small changes"),
])
def test_bad_combinations_are_one_line_usage_errors(options, message):
    with pytest.raises(UsageError) as info:
        C(**options)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_causal_at_decode_may_name_its_own_impl():
    assert C(broken="causal-at-decode", impl="sdpa", decode=1).impl == "sdpa"


@pytest.mark.parametrize("args,message", [
    (["--image", "32", "--patch", "8", "--seq-len", "4"], "--seq-len cannot be combined with --image"),
    (["--decode", "2", "--kv-len", "4"], "--decode cannot be combined with --kv-len"),
    (["--decode", "x"], "'x' is not a valid int"),
    (["--image", "30", "--patch", "7"], "--patch 7 does not divide --image 30"),
])
def test_cli_usage_errors_exit_2_in_one_line(cli, args, message):
    res = cli("run", *args)
    assert res.exit_code == 2 and message in res.output
    assert "Traceback" not in res.output


def test_meta_device_keeps_the_names():
    run = trace_variant(C(decode=2), max_bytes=1000)
    assert run.device == "meta" and not_notes(run) == []
    assert named(events_of(run, "cat")[-1].output) == [("B", 2), ("H", 8), ("T+2", 8), ("d_k", 64)]
    run = trace_variant(C(image=32, patch=8), max_bytes=1000)
    assert run.device == "meta" and named(events_of(run, "cat")[0].output) == [("B", 2), ("1+N", 17), ("D", 512)]


def test_memory_estimate_grows_with_steps_and_pixels():
    from shapetrace.attention.memory import variant_bytes

    assert variant_bytes(C(decode=8)) > variant_bytes(C(decode=1)) > variant_bytes(C())
    assert variant_bytes(C(image=64, patch=8)) > variant_bytes(C(image=32, patch=8))


@pytest.mark.parametrize("args", [["--decode", "3", "--d-model", "64"],
                                  ["--image", "32", "--patch", "8", "--d-model", "64"],
                                  ["--break", "cache-wrong-axis", "--d-model", "64"]], ids=["decode", "image", "break"])
def test_readme_excerpts_come_from_a_real_run(cli, args):
    """Every line pasted in the README's section on --decode and --image is in today's output."""
    from conftest import ROOT

    result = cli("run", *args, "--width", "100")
    live = {line.rstrip() for line in result.output.splitlines()}
    readme = (ROOT / "README.md").read_text()
    block = readme.split(f"`shapetrace run {' '.join(args)}` at 100 columns")[1].split("```text\n")[1]
    pasted = [line.rstrip() for line in block.split("```")[0].splitlines() if line.strip() not in ("…", "")]
    missing = [line for line in pasted if line not in live]
    assert len(pasted) > 10 and missing == []


def test_decode_export_step_and_predict_fall_back_or_write(cli, tmp_path):
    out = tmp_path / "decode.md"
    res = cli("run", "--decode", "2", "--d-model", "64", "--export", str(out), "--width", "100")
    assert res.exit_code == 0 and out.is_file()
    text = out.read_text()
    assert "T+1=7" in text and "T+2=8" in text and "T[-1:]=1" in text
    res = cli("run", "--image", "32", "--patch", "8", "--d-model", "64", "--step", "--width", "100")
    assert res.exit_code == 0 and "1+N=17" in res.output   # no terminal here: the plain table
    answers = tmp_path / "answers.txt"
    answers.write_text("[2, 64, 4, 4]\n")
    res = cli("run", "--image", "32", "--patch", "8", "--d-model", "64", "--predict", "--answers", str(answers),
              "--width", "100")
    assert res.exit_code == 0 and "score 1/" in res.output, res.output[-600:]


def test_image_train_mode_keeps_dropout_active():
    run = trace_variant(C(d_model=64, heads=8, image=32, patch=8, dropout=0.5, train=True))
    drop = events_of(run, "dropout")
    assert len(drop) == 1 and not drop[0].noop
    assert named(drop[0].output) == [("B", 2), ("H", 8), ("1+N", 17), ("1+N", 17)]
