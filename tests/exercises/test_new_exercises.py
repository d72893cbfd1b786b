"""The exercises of lessons 9-12 (KV cache, images, rotary, fused kernels): their inputs, the claims
their texts make about which sizes hide a bug (recomputed by torch), and their verdicts' exact wording.

The content tests every exercise shares (starter fails as intended, solution passes, each mistake gets
its own explanation, each learner-test solution kills every mutant) are in test_lessons.py and
test_test_exercises.py; this module adds what is particular to the new ones.
"""

from __future__ import annotations

import math
import random
import re

import pytest
import torch
import torch.nn.functional as F

from shapetrace.attention.catalogue import CATALOGUE
from shapetrace.exercises import inputs as inp
from shapetrace.exercises.content import load

CURRICULUM = load()
NEW = {9: ["append-kv", "decode-weights", "test-append-kv"], 10: ["patchify", "add-cls-token", "test-patchify"],
       11: ["apply-rope", "rope-complex-pairs", "test-apply-rope"],
       12: ["sdpa-layout", "sdpa-bool-mask", "test-fused-attention"]}


def _fn(code: str, name: str):
    namespace: dict = {}
    exec(compile(code, f"<{name}>", "exec"), namespace)
    return namespace[name]


def _solution(ex_id: str):
    ex = CURRICULUM.exercise(ex_id)
    return _fn(ex.solution.read_text(), ex.function)


def _starter(ex_id: str):
    ex = CURRICULUM.exercise(ex_id)
    return _fn(ex.starter.read_text(), ex.function)


def _mistake(ex_id: str, mistake_id: str):
    ex = CURRICULUM.exercise(ex_id)
    return _fn(next(m.code for m in ex.mistakes if m.id == mistake_id), ex.function)


def _mutant(break_id: str, function: str):
    return _fn(CATALOGUE[break_id].function(function).code, function)


def test_four_new_lessons_with_their_exercises_in_order():
    for number, ids in NEW.items():
        lesson = CURRICULUM.lesson(number)
        assert list(lesson.exercises) == ids
        dirs = {9: "09_kv_cache", 10: "10_images", 11: "11_rotary", 12: "12_fused_kernels"}
        assert lesson.folder.name == dirs[number]
    new = [CURRICULUM.exercise(i) for ids in NEW.values() for i in ids]
    assert len(new) == 12 and sum(e.kind == "test" for e in new) == 4
    assert {e.lesson for e in new if e.kind == "test"} == {9, 10, 11, 12}


# -- the input builders ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cache_inputs_are_a_cache_and_one_step_with_values_of_their_own(seed):
    for case in inp.draw("kv_cache", random.Random(seed)):
        cache, step = case.args
        s = case.sizes
        assert tuple(cache.shape) == (s["B"], s["H_kv"], s["T"], s["d_k"])
        assert tuple(step.shape) == (s["B"], s["H_kv"], 1, s["d_k"])
        both = torch.cat([cache.flatten(), step.flatten()])
        assert both.unique().numel() == both.numel(), "every value says which element it is"
        assert case.names == ["B H_kv T d_k", "B H_kv T_new d_k"] and case.labels == ("cache", "step")


def test_decode_inputs_are_one_query_against_the_cache_and_its_own_key():
    for case in inp.draw("decode", random.Random(3)):
        q, k = case.args
        s = case.sizes
        assert tuple(q.shape) == (s["B"], s["H"], 1, s["d_k"])
        assert tuple(k.shape) == (s["B"], s["H"], s["T"] + 1, s["d_k"])


def test_image_inputs_cut_into_whole_patches_and_the_sizes_the_learner_reads():
    cases = inp.draw("image", random.Random(4))
    for case in cases:
        x, p = case.args
        s = case.sizes
        assert set(s) == {"B", "C", "p", "h", "w"} and p == s["p"]
        assert tuple(x.shape) == (s["B"], s["C"], s["h"] * p, s["w"] * p)
    assert [c.case for c in cases] == list(inp.KINDS)
    distinct = cases[0].sizes
    assert len(set(distinct.values())) == 5, "a wrong order shows in the values of distinct sizes"
    assert len(set(cases[2].sizes.values())) == 1, "equal sizes: a shape check alone cannot tell"


def test_rotary_tables_are_cos_and_sin_of_positions_times_frequencies():
    for case in inp.draw("rope", random.Random(5)):
        x, cos, sin = case.args
        B, H, T, d_k = x.shape
        assert d_k % 2 == 0 and tuple(cos.shape) == tuple(sin.shape) == (T, d_k)
        assert torch.allclose(cos ** 2 + sin ** 2, torch.ones(T, d_k), atol=1e-5)
        assert torch.equal(cos[:, :d_k // 2], cos[:, d_k // 2:]), "rotate_half's layout: i pairs with i + d_k/2"
        angles = torch.atan2(sin[1:, 0], cos[1:, 0]) - torch.atan2(sin[:-1, 0], cos[:-1, 0])
        assert torch.allclose(torch.remainder(angles, 2 * math.pi), torch.ones(T - 1), atol=1e-4), \
            "feature 0 turns by 1 radian per position (frequency 1)"
    for case in inp.draw("rope_pairs", random.Random(5)):
        x, angles = case.args
        assert tuple(angles.shape) == (x.shape[2], x.shape[3] // 2)


def test_padding_inputs_use_multihead_attention_polarity_and_leave_a_real_key():
    for seed in range(5):
        for case in inp.draw("sdpa_padding", random.Random(seed)):
            pad = case.args[3]
            assert pad.dtype == torch.bool and not bool(pad.all(-1).any()), "every sequence keeps a real key"
            if pad.shape[1] > 1:
                assert bool(pad.any()), "some key is padding, so a wrong polarity shows"


def test_an_explanation_names_which_input_a_value_came_from():
    from shapetrace.exercises.explain_check import describe_source

    g = torch.Generator().manual_seed(0)
    args, names, dims = inp.BUILDERS["kv_cache"](dict(B=2, H_kv=3, T=4, d_k=5), g)
    case = inp.Inputs("distinct", args, names, dims, {}, inp.LABELS["kv_cache"])
    cache, step = case.args
    assert describe_source(float(step[0, 1, 0, 2]), case) == \
        "step[0, 1, 0, 2] (batch 0, kv head 1, new step 0, feature 2)"
    assert describe_source(float(cache[1, 0, 2, 3]), case) == \
        "cache[1, 0, 2, 3] (batch 1, kv head 0, token 2, feature 3)"
    args, names, dims = inp.BUILDERS["cls"](dict(B=2, T=3, H=2, d_k=4), g)
    cls_case = inp.Inputs("distinct", args, names, dims, {}, inp.LABELS["cls"])
    assert describe_source(float(cls_case.args[1][0, 0, 4]), cls_case) == "cls[0, 0, 4] (feature 4)"
    heads = inp.draw("kv_heads", random.Random(0))[0]
    assert describe_source(float(heads.args[0][0, 1, 0, 0]), heads).startswith("x[0, 1, 0, 0] (batch 0, kv head 1")


# -- what the texts claim about sizes, recomputed by torch ---------------------------------------------

def _same(f, g, *args) -> bool:
    a, b = f(*args), g(*args)
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-5)


def test_append_kv_mutants_hide_exactly_where_their_texts_say():
    ref = _solution("append-kv")
    one = (torch.randn(1, 1, 1, 4), torch.randn(1, 1, 1, 4))           # one head, one cached step
    many = (torch.randn(2, 3, 4, 5), torch.randn(2, 3, 1, 5))          # the solution's sizes
    wrong_axis = _mutant("cache-wrong-axis", "append_kv")
    assert wrong_axis(*one).numel() == ref(*one).numel() and wrong_axis(*one).shape == (1, 2, 1, 4)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        wrong_axis(*many)
    assert _same(_mutant("cache-first-head-step", "append_kv"), ref, *one)
    for bug in ("cache-new-first", "cache-stale-step", "cache-first-head-step", "cache-drops-oldest"):
        assert not _same(_mutant(bug, "append_kv"), ref, *many), bug


def test_patchify_mutants_hide_exactly_where_their_texts_say():
    ref = _solution("patchify")
    image = lambda B, C, h, w, p: torch.randn(B, C, h * p, w * p)      # noqa: E731
    hides = {"patches-without-permute": [(2, 3, 1, 1, 4), (2, 1, 3, 4, 1)],  # one patch; C = 1 and p = 1
             "patches-column-major": [(2, 3, 1, 4, 2), (2, 3, 3, 1, 2)],     # one row, one column of patches
             "patch-pixels-transposed": [(2, 3, 2, 3, 1)],                   # p = 1
             "patches-channel-last": [(2, 1, 2, 3, 2)]}                      # C = 1
    for bug, sizes in hides.items():
        for B, C, h, w, p in sizes:
            assert _same(_mutant(bug, "patchify"), ref, image(B, C, h, w, p), p), (bug, sizes)
    x = image(2, 3, 2, 4, 3)                                           # the solution's sizes
    for bug in list(hides) + ["unfold-without-transpose"]:
        assert not _same(_mutant(bug, "patchify"), ref, x, 3), bug
    square = image(1, 1, 2, 2, 2)                                      # N = C·p·p = 4
    assert _mutant("unfold-without-transpose", "patchify")(square, 2).shape == ref(square, 2).shape
    assert torch.equal(F.unfold(x, 3, stride=3).transpose(1, 2), ref(x, 3)), "unfold's order is (C, p, p)"


def test_fused_attention_mutants_hide_exactly_where_their_texts_say():
    ref = _solution("sdpa-layout")
    qkv = lambda B, T, H, d: [torch.randn(B, T, H, d) for _ in range(3)]  # noqa: E731
    assert _mutant("sdpa-no-transpose-back", "fused_attention")(*qkv(1, 3, 3, 4)).shape == (1, 3, 3, 4)
    for H, T in ((1, 5), (4, 1)):
        assert _same(_mutant("sdpa-view-not-transpose", "fused_attention"), ref, *qkv(2, T, H, 4))
    assert _same(_mutant("sdpa-is-causal", "fused_attention"), ref, *qkv(2, 1, 3, 4))
    assert _same(_mutant("sdpa-wrong-scale", "fused_attention"), ref, *qkv(2, 5, 3, 1))
    solution_sizes = qkv(2, 5, 3, 4)
    for bug in ("sdpa-wrong-layout", "sdpa-no-transpose-back", "sdpa-view-not-transpose", "sdpa-is-causal",
                "sdpa-wrong-scale"):
        assert not _same(_mutant(bug, "fused_attention"), ref, *solution_sizes), bug


def test_rotary_mutants_hide_exactly_where_their_texts_say():
    ref = _solution("apply-rope")
    x = torch.randn(2, 3, 1, 4)
    position_0 = (x, torch.ones(1, 4), torch.zeros(1, 4))              # the starter test's one token
    for bug in ("rope-table-on-heads", "rope-sign-flipped", "rope-neighbour-pairs", "rope-cos-only"):
        assert _same(_mutant(bug, "apply_rope"), ref, *position_0), bug
    two = inp.rope_angles(3, 2, 1)                                      # d_k = 2: one pair, both ways
    table = torch.cat([two, two], -1)
    assert _same(_mutant("rope-neighbour-pairs", "apply_rope"), ref, torch.randn(2, 4, 3, 2), table.cos(), table.sin())
    on_heads = _mutant("rope-table-on-heads", "apply_rope")
    angles = inp.rope_angles(5, 8, 1)
    table = torch.cat([angles, angles], -1)
    with pytest.raises(RuntimeError, match="must match"):
        on_heads(torch.randn(2, 3, 5, 8), table.cos(), table.sin())     # T = 5, H = 3
    assert on_heads(torch.randn(2, 1, 5, 8), table.cos(), table.sin()).shape == (2, 5, 5, 8), "H = 1 runs"
    square = torch.randn(2, 5, 5, 8)                                    # T = H: runs, wrong
    assert not _same(on_heads, ref, square, table.cos(), table.sin())
    for bug in ("rope-sign-flipped", "rope-neighbour-pairs", "rope-cos-only"):
        assert not _same(_mutant(bug, "apply_rope"), ref, torch.randn(2, 3, 5, 8), table.cos(), table.sin()), bug


def test_the_starters_silent_cases_are_what_their_explanations_say():
    # apply-rope: with T = H the table on the head axis runs and turns head h by position h's angle
    x, cos, sin = inp.draw("rope", random.Random(0))[2].args                # the equal case: T = H
    B, H, T, d_k = x.shape
    assert T == H
    wrong = _starter("apply-rope")(x, cos, sin)
    assert wrong.shape == x.shape and not torch.allclose(wrong, _solution("apply-rope")(x, cos, sin))
    x1, x2 = x.chunk(2, dim=-1)
    by_head = x * cos[:, None, :] + torch.cat([-x2, x1], -1) * sin[:, None, :]
    assert torch.equal(wrong, by_head) and torch.equal(cos[:, None, :].expand(H, T, d_k)[1, 0], cos[1])
    # add-cls-token: with B = 1 the cat without expand runs and is right
    tokens, cls = torch.randn(1, 4, 6), torch.randn(1, 1, 6)
    assert torch.equal(_starter("add-cls-token")(tokens, cls), _solution("add-cls-token")(tokens, cls))
    # append-kv: with a one-step cache the cat along the heads runs and returns 2·H_kv heads of one step
    assert _starter("append-kv")(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)).shape == (2, 6, 1, 4)
    # decode-weights: the starter's mask is the one is_causal=True builds for one query and T + 1 keys
    q, k = inp.draw("decode", random.Random(0))[0].args
    v = torch.randn(k.shape)
    assert torch.allclose(_starter("decode-weights")(q, k) @ v,
                          F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5)
    assert torch.allclose(_solution("decode-weights")(q, k) @ v, F.scaled_dot_product_attention(q, k, v), atol=1e-5)


def test_rope_complex_pairs_needs_even_strides_and_pairs_neighbours():
    x = inp.strided(torch.randn(2, 3, 4, 6))                            # a slice of a wider buffer
    angles = inp.rope_angles(4, 6, 0)
    with pytest.raises(RuntimeError, match="stride"):
        _mistake("rope-complex-pairs", "odd-strides")(x, angles)
    out = _solution("rope-complex-pairs")(x, angles)
    c, s = angles.cos(), angles.sin()
    assert torch.allclose(out[..., 0], x[..., 0] * c[:, 0] - x[..., 1] * s[:, 0], atol=1e-5)
    assert torch.allclose(out[..., 1], x[..., 0] * s[:, 0] + x[..., 1] * c[:, 0], atol=1e-5)
    # the same rotation as rotate_half, once the features are put in rotate_half's order
    order = torch.cat([torch.arange(0, 6, 2), torch.arange(1, 6, 2)])
    table = torch.cat([angles, angles], -1)
    halves = _solution("apply-rope")(x[..., order], table.cos(), table.sin())
    assert torch.allclose(halves, out[..., order], atol=1e-5)


def test_sdpa_boolean_masks_mean_attend_and_float_masks_are_added():
    q, k, v = (torch.randn(1, 1, 2, 4) for _ in range(3))
    pad = torch.tensor([[False, True]])                                 # key 1 is padding
    ref = _solution("sdpa-bool-mask")(q, k, v, pad)
    assert torch.allclose(ref, v[:, :, :1].expand(1, 1, 2, 4), atol=1e-6), "only key 0 is attended"
    assert torch.allclose(_starter("sdpa-bool-mask")(q, k, v, pad), v[:, :, 1:].expand(1, 1, 2, 4), atol=1e-6)
    scores = q @ k.transpose(-2, -1) / 2 + pad.float()
    assert torch.allclose(_mistake("sdpa-bool-mask", "float-mask")(q, k, v, pad), scores.softmax(-1) @ v, atol=1e-6)


def test_every_reshaping_line_of_the_new_broken_functions_carries_a_shape_comment():
    reshaping = re.compile(r"\.(view|reshape|transpose|permute|expand|expand_as|flatten)\(")
    for name in ("append_kv", "patchify", "apply_rope", "fused_attention"):
        for entry in CATALOGUE.values():
            f = entry.function(name)
            for line in f.code.splitlines() if f else []:
                if reshaping.search(line):
                    assert "# (" in line, (entry.name, line)


def _decode_by_equality(value: float, tensor: torch.Tensor):
    """The definition :func:`inp.decode_many` must agree with: ``tensor == value`` has exactly one hit."""
    if value != value:
        return None
    hits = (tensor == value).nonzero()
    return tuple(int(i) for i in hits[0]) if len(hits) == 1 else None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64])
def test_decoding_many_values_agrees_with_equality_one_value_at_a_time(dtype):
    g = torch.Generator().manual_seed(3)
    for shape in [(2, 3, 4), (3, 3), (5,), (1, 1, 2, 2), (0, 3), (4, 1, 4)]:
        n = int(torch.tensor(shape).prod())
        codes = torch.arange(n, dtype=torch.float64).reshape(shape) * 0.37 - 1
        tensor = codes.to(dtype)
        if n > 3:
            tensor.view(-1)[1] = tensor.view(-1)[2]  # a value held twice: no single element
        if n > 5 and dtype.is_floating_point:
            tensor.view(-1)[4] = float("nan")
            tensor.view(-1)[5] = -0.0
        values = codes.reshape(-1).tolist() + [0.0, -0.0, float("nan"), 1e9, -1.0, 0.37 - 1,
                                               float(torch.rand(1, generator=g))]
        assert inp.decode_many(values, tensor) == [_decode_by_equality(v, tensor) for v in values], (dtype, shape)
        assert [inp.decode(v, tensor) for v in values[:3]] == [_decode_by_equality(v, tensor) for v in values[:3]]


def test_a_size_in_an_input_name_is_not_an_axis_name_and_zero_has_no_sign():
    from shapetrace.exercises.calls import axis_names, call
    from shapetrace.exercises.explain_check import value_facts

    assert axis_names("1 1 D") == [None, None, "D"] and axis_names("B T_new d_k") == ["B", "T_new", "d_k"]
    tokens, cls = torch.randn(2, 3, 4), torch.randn(1, 1, 4)
    got = call(_solution("add-cls-token"), [tokens, cls], ["B N D", "1 1 D"], dict(B=2, N=3, D=4))
    assert got.exc is None and got.trace.events[0].inputs[0].dims == (None, None, "D")
    case = inp.Inputs("distinct", [torch.zeros(1)], ["x"], {}, {})
    facts = value_facts(torch.tensor([1.0]), torch.tensor([-0.0]), case, movement=False)
    assert facts["lines"] == ["out[0] is 1; expected 0"]
