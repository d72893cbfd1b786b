"""shapetrace/engine/infer/seeds.py: names for a tensor that enters the traced code, from the declared sizes.

A decoding step's input ``[B, 1, D]`` (one new token's features) is seeded ``[B, 1, D]``: on 1123aec (main before
round 12) no seed fitted it, so Whisper's decoding step (tests/corpus/public12/whisper_cross_cache.py) had every
op unnamed ("? checked 44 of 67 ops ... not checked (unnamed axes): #43 layer_norm, #44 linear, ...")."""

from __future__ import annotations

import torch

import shapetrace
from tests.corpus.helpers import round_outcome, traced_build, verdict_line
from tests.corpus.public6 import ldm_cross
from tests.corpus.public12 import whisper_cross_cache
from tests.corpus.public15 import video_swin_3d
from tests.corpus.public20 import griffin_local
from tests.corpus.public26 import pix2struct
from tests.corpus.public28 import bark
from tests.corpus.public37 import sam_two_way, stable_audio_dit
from tests.corpus.public39 import tortoise_qkv
from tests.corpus.reports2 import labml_ddpm_softmax
from tests.corpus.reports23 import min_dt_dropout_output


def test_one_tokens_features_are_seeded_batch_one_features():
    x = torch.randn(2, 1, 64)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        x.view(2, 1, 4, 16).transpose(1, 2)
    assert [e.outputs[0].dims for e in t.events] == [("B", None, "H", "d_k"), ("B", "H", None, "d_k")]


def test_whispers_decoding_step_is_named_and_checked():
    t = traced_build(whisper_cross_cache, "", "B=2 T=6 S=10 D=64 H=4")
    step = next(e for e in t.events if e.op == "layer_norm" and e.inputs[0].shape == (2, 1, 64))
    assert step.outputs[0].dims == ("B", None, "D")
    assert verdict_line(t).startswith("✓ checked all 67 ops that could carry a layout bug")


def test_a_feature_map_is_seeded_channels_first_where_its_grid_is_declared():
    """``[B, D, Hp, Wp]`` (torch's convolutions put channels first) is seeded where Hp and Wp are declared; on
    8110233 no seed fitted it, and labmlai's DDPM ``AttentionBlock`` (issue #146, softmax over the queries)
    was ``? nothing was checked`` correct or buggy."""
    x = torch.randn(3, 32, 2, 5)
    with shapetrace.trace(dims="B=3 Hp=2 Wp=5 D=32 H=4") as t:
        x.view(3, 32, -1).permute(0, 2, 1)
    assert [e.outputs[0].dims for e in t.events] == [("B", "D", "N"), ("B", "N", "D")]
    with shapetrace.trace(dims="B=3 T=10 D=32 H=4") as t:   # (no grid declared: no seed)
        x.view(3, 32, -1)
    assert t.events[0].outputs[0].dims == (None, None, None)


def test_a_feature_map_or_clip_is_seeded_channels_last_where_its_grid_is_declared():
    """``[B, Hp, Wp, D]`` (Swin's windows) and ``[B, Fp, Hp, Wp, D]`` (Video Swin's clips, mmaction's
    ``SwinTransformerBlock3D``) are seeded where the grid is declared, as the channels-first map is; on 4212b85
    no seed fitted them and tests/corpus/public15/video_swin_3d.py was ``? nothing was checked``, correct or
    buggy (now ? 28 of 29, and its two bugs ✗ mixed-axis, ✗ roll-not-undone)."""
    clip, image = torch.randn(3, 2, 6, 10, 32), torch.randn(3, 6, 10, 32)
    with shapetrace.trace(dims="B=3 D=32 H=4 Fp=2 Hp=6 Wp=10") as t:
        clip.view(3, 1, 2, 3, 2, 5, 2, 32)
        image.reshape(3, -1, 32)
    assert [e.outputs[0].dims for e in t.events] == [("B", None, "Fp", "Hp/2", "Hp%2", "Wp/2", "Wp%2", "D"),
                                                     ("B", "N", "D")]
    with shapetrace.trace(dims="B=3 D=32 H=4") as t:   # (no grid declared: no seed)
        image.reshape(3, -1, 32)
    assert t.events[0].outputs[0].dims == (None, None, None)
    dims = video_swin_3d.DIMS[0]
    assert [verdict_line(traced_build(video_swin_3d, bug, dims))[0] for bug in ("", *video_swin_3d.BUGS)] == \
        ["?", "✗", "✗"]


def test_labml_ddpm_attention_block_is_checked_and_its_softmax_over_the_queries_found():
    dims = labml_ddpm_softmax.DIMS[0]
    assert verdict_line(traced_build(labml_ddpm_softmax, "", dims)).startswith("✓ checked all 12 ops")
    t = traced_build(labml_ddpm_softmax, "softmax-queries", dims)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == [("error", "softmax-wrong-axis")]


def test_a_sequence_first_step_is_seeded_one_batch_features():
    """ChatGLM's and fairseq's decoding step enters sequence-first, ``[1, B, D]``; on 48779ab no seed fitted
    it and every op of the step was unnamed (tests/corpus/reports3/chatglm_beam_reorder.py: "? checked 19 of
    35 ops ... not checked (unnamed axes): #19 index_select, #20 linear, ...")."""
    x = torch.randn(1, 2, 64)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        x.view(1, 2, 4, 16).permute(1, 2, 0, 3)
    assert [e.outputs[0].dims for e in t.events] == [(None, "B", "H", "d_k"), ("B", "H", None, "d_k")]


def test_a_flattened_grid_sequence_first_is_seeded_as_its_tokens():
    """Mask2Former's and DETR's memory ``src.flatten(2).permute(2, 0, 1)``, ``[Hp*Wp, B, D]`` for
    ``nn.MultiheadAttention`` (tests/corpus/public17/mask2former_masked.py): with the grid declared, the keys are
    the grid's tokens. On af0e286 (main) no seed fitted it and the library's heads were unnamed
    (``[None, None, None]``)."""
    src = torch.randn(12, 2, 32)
    with shapetrace.trace(dims="B=2 D=32 H=4 Hp=3 Wp=4") as t:
        src.view(12, 8, 8).transpose(0, 1)                                   # (B*H, Hp*Wp, d_k)
    assert [e.outputs[0].dims for e in t.events] == [("Hp*Wp", "B*H", "d_k"), ("B*H", "Hp*Wp", "d_k")]


def test_a_flattened_grid_batch_first_is_seeded_and_a_size_that_is_no_grid_is_not():
    with shapetrace.trace(dims="B=2 D=32 H=4 Hp=3 Wp=4") as t:
        torch.randn(2, 12, 32).view(2, 12, 4, 8)
        torch.randn(2, 13, 32).view(2, 13, 4, 8)
    assert [e.outputs[0].dims for e in t.events] == [("B", "Hp*Wp", "H", "d_k"), (None,) * 4]


def test_declared_n_tokens_are_seeded_wherever_n_stands_among_the_declared_names():
    """DETR's object queries ``[B, N, D]`` beside a memory of S tokens declared after N (``B=2 N=5 S=30 D=32``,
    tests/corpus/public17/deformable_core.py): on af0e286 (main) only the declared order's first three names
    (``[B, N, S]``) were tried, and the queries stayed unnamed."""
    with shapetrace.trace(dims="B=2 N=5 S=30 D=32 H=4") as t:
        torch.randn(2, 5, 32).view(2, 5, 4, 8)
        torch.randn(5, 2, 32).view(5, 2, 4, 8)
    assert [e.outputs[0].dims for e in t.events] == [("B", "N", "H", "d_k"), ("N", "B", "H", "d_k")]


def test_a_grid_as_many_as_the_tokens_is_no_second_reading_of_them():
    """PVT's input ``[B, N, C]`` with ``T = Hp · Wp`` declared: ``[B, T, D]`` and ``[B, Hp*Wp, D]`` are one
    reading (the grid's tokens). On a8dba97 (b404943 seeded the flattened grid) the two readings named every
    axis differently and the report showed none: public7/pvt's correct file was ``? checked 0 of 21``."""
    x = torch.randn(2, 24, 32)
    with shapetrace.trace(dims="B=2 T=24 Hp=6 Wp=4 D=32 H=4") as t:
        x.transpose(1, 2)                                                # (B, D, T)
    assert t.report().events[0].outputs[0].dims == ("B", "D", "T")


class _Joined(torch.nn.Module):
    def forward(self, first, second):
        return torch.cat([first, second + 40], dim=1)


def test_a_sequence_joined_from_the_models_arguments_is_seeded_as_it_would_be_entered_whole():
    """``cat`` of the model's arguments that fit no declared shape (``(B, 3)`` and ``(B, 3) + 40``), along an axis
    no part names, is seeded as the tensor that enters, assembled: ``[B, T]``. On 2cc755a (main d4a212b with
    tests/corpus/public28) it stayed ``[B, ?]`` and Bark's coarse model (tests/corpus/public28/bark.py, semantic
    history and offset coarse ids joined) was ``? checked 0 of 27`` correct and with its heads split without the
    permute; now ✓ all 27 and ✗ mixed-axis."""
    semantic, coarse = torch.randint(0, 40, (2, 3)), torch.randint(0, 32, (2, 3))
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        _Joined()(semantic, coarse)
    assert t.events[-1].outputs[0].dims == ("B", "T")
    dims = bark.DIMS[0]
    assert verdict_line(traced_build(bark, "", dims)).startswith("✓ checked all 27 ops that could carry a layout bug")
    assert round_outcome(bark, "split-heads-no-permute", dims) == ("✗", ("mixed-axis", "mixed-axis"))


def test_a_join_of_tensors_made_in_the_traced_code_is_not_seeded():
    """The seed is for what the model was given: the same join of tensors the traced code made itself (outside a
    module call, as a rotary table's ``arange`` is made inside one), or of an argument and a parameter, keeps the
    join to its own rules (its joined axis unnamed where no part names it)."""
    ids, given = torch.randint(0, 9, (2, 3)), torch.randint(0, 9, (2, 3))
    w = torch.nn.Parameter(torch.randn(2, 3))
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        torch.cat([ids, ids + 40], dim=1)
        _Joined()(given, w.long())
    joins = [e for e in t.events if e.op == "cat"]
    assert [e.outputs[0].dims[1] for e in joins] == [None, None]


# -- an input's own width: [B, T, F_in] --------------------------------------------------------------------------

def _first_ops(dims: str, x: torch.Tensor, run) -> list[tuple]:
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        run(x)
    return [(e.op, e.inputs[0].dims, e.outputs[0].dims) for e in t.events]


def test_an_input_of_an_undeclared_width_is_seeded_with_features_of_its_own():
    """``[B, T, 3]`` (a trajectory's states: a width no declared name has) is ``[B, T, F_in]``, and the module's
    ``Linear(3, D)`` that reads it makes ``D``. On fa53f62 (main before names1) no seed fitted it: every axis of
    every op unnamed, ``? nothing was checked``."""
    lin = torch.nn.Linear(3, 32)
    with torch.no_grad(), shapetrace.trace(dims={"B": 2, "T": 5, "D": 32, "H": 4}) as t:
        lin(torch.randn(2, 5, 3)).view(2, 5, 4, 8).transpose(1, 2)
    assert [(e.op, e.inputs[0].dims, e.outputs[0].dims) for e in t.events] == [
        ("linear", ("B", "T", "F_in"), ("B", "T", "D")), ("view", ("B", "T", "D"), ("B", "T", "H", "d_k")),
        ("transpose", ("B", "T", "H", "d_k"), ("B", "H", "T", "d_k"))]
    assert verdict_line(t).startswith("✓ checked all 3 ops that could carry a layout bug: every axis keeps its "
                                      "meaning from input to output")


def test_an_input_width_is_never_seeded_where_a_size_could_be_another_name():
    """Equal sizes never decide a name: batch at H's size (B = H = 4), a width of B's size (``[2, 5, 2]`` at
    B = 2: which axis is the batch?), tokens first (``[T, B, 3]``: only batch then tokens is read) stay unnamed;
    with S declared a second sequence is ``S``."""
    lin, narrow = torch.nn.Linear(3, 32), torch.nn.Linear(2, 32)
    unnamed = [("linear", (None, None, None), (None, None, None))]
    assert _first_ops("B=4 T=5 D=32 H=4", torch.randn(4, 5, 3), lin) == unnamed
    assert _first_ops("B=2 T=5 D=32 H=4", torch.randn(2, 5, 2), narrow) == unnamed
    assert _first_ops("B=2 T=5 D=32 H=4", torch.randn(5, 2, 3), lin) == unnamed
    assert _first_ops("B=2 T=5 S=7 D=32 H=4", torch.randn(2, 7, 3), lin) == [
        ("linear", ("B", "S", "F_in"), ("B", "S", "D"))]


def test_what_is_made_of_an_input_width_is_F_or_unnamed_never_F_in():
    """A module's projection of the input's width to a width no name has is ``F`` (the same width too: what the
    weight makes is not the input's features); a weight that is no module's parameter names nothing; a piece
    of ``F_in`` is unnamed (as a piece of ``F``), a slice and a transpose keep it."""
    same, wide = torch.nn.Linear(3, 3), torch.nn.Linear(3, 7)
    dims = "B=2 T=5 D=32 H=4"
    assert _first_ops(dims, torch.randn(2, 5, 3), same) == [("linear", ("B", "T", "F_in"), ("B", "T", "F"))]
    assert _first_ops(dims, torch.randn(2, 5, 3), wide) == [("linear", ("B", "T", "F_in"), ("B", "T", "F"))]
    weight = torch.randn(32, 3)
    assert _first_ops(dims, torch.randn(2, 5, 3), lambda x: torch.nn.functional.linear(x, weight)) == [
        ("linear", ("B", "T", "F_in"), ("B", "T", None))]
    x = torch.randn(2, 5, 14)
    made = _first_ops(dims, x, lambda x: (x.view(2, 5, 2, 7), x[..., :3], x.transpose(1, 2)))
    assert [out for _, _, out in made] == [("B", "T", None, None), ("B", "T", "F_in[0:3]"), ("B", "F_in", "T")]


def test_a_slice_of_an_input_width_is_features_to_a_modules_projection():
    """Pix2Struct's patches ``(B, T, 2 + P)``: row and column ids in features 0 and 1, the patch read from 2 on by
    ``patch_projection``, which makes D from ``F_in[2:14]`` (tests/corpus/public26/pix2struct.py: its
    ``mask-on-queries`` was ``? checked 0 of 25`` on fa53f62, now ``✗ mask-wrong-axis``)."""
    patch = torch.nn.Linear(12, 32)
    assert _first_ops("B=2 T=5 D=32 H=4", torch.randn(2, 5, 14), lambda x: patch(x[..., 2:])) == [
        ("__getitem__", ("B", "T", "F_in"), ("B", "T", "F_in[2:14]")),
        ("linear", ("B", "T", "F_in[2:14]"), ("B", "T", "D"))]
    assert round_outcome(pix2struct, "mask-on-queries", pix2struct.DIMS[0]) == ("✗", ("mask-wrong-axis",))


def test_an_input_of_a_declared_features_width_is_seeded_with_that_name():
    """A width declared with the features role (``C:features=24``: latent diffusion's text context, CompVis
    ``CrossAttention``'s ``context_dim``) is a seed's last axis as D is: ``[B, S, C]``, and ``to_k``/``to_v`` read it
    as features (D at the model's width). On fa53f62 no seed fitted it and tests/corpus/public6/ldm_cross.py checked
    11 of 27 ops (now 25 of 27: it stays ``?`` on its expand and reshape of the mask). A name declared with
    another role is no feature width (``ctx:tokens=24``: unnamed)."""
    lin = torch.nn.Linear(24, 32)
    x = torch.randn(2, 7, 24)
    assert _first_ops("B=2 S=7 D=32 H=4 C:features=24", x, lin) == [("linear", ("B", "S", "C"), ("B", "S", "D"))]
    assert _first_ops("B=2 S=7 D=32 H=4 ctx:tokens=24", x, lin) == [
        ("linear", (None, None, None), (None, None, None))]
    line = verdict_line(traced_build(ldm_cross, "", ldm_cross.DIMS[0]))
    assert line.startswith("? checked 25 of 27 ops that could carry a layout bug; not checked (unnamed axes): "
                           "#17 expand, #18 reshape;")


def test_an_input_of_one_number_per_token_is_seeded_batch_tokens_and_its_projection_makes_D():
    """``[B, T, 1]`` (a return-to-go per step: kzl/decision-transformer's ``embed_return = Linear(1, D)``) is
    ``[B, T, 1]``, its last axis unnamed (a flag or a mask's broadcast axis looks the same); a module's projection
    of that one number per token makes D as a projection of features does. On fa53f62 every axis was unnamed;
    tests/corpus/reports23/min_dt_dropout_output.py then checked 3 of 33 ops (now 6: its stacked kinds stay
    unnamed). At B = H the batch and tokens are not read (``[4, 5, 1]`` at H = 4), and the projection still makes
    D (one number per position is its one feature, whatever the other axes hold)."""
    one = torch.nn.Linear(1, 32)
    assert _first_ops("B=2 T=5 D=32 H=4", torch.randn(2, 5, 1), one) == [
        ("linear", ("B", "T", None), ("B", "T", "D"))]
    weight = torch.randn(32, 1)
    assert _first_ops("B=2 T=5 D=32 H=4", torch.randn(2, 5, 1), lambda x: torch.nn.functional.linear(
        x, weight)) == [("linear", ("B", "T", None), ("B", "T", None))]
    assert _first_ops("B=4 T=5 D=32 H=4", torch.randn(4, 5, 1), one) == [
        ("linear", (None, None, None), (None, None, "D"))]
    assert verdict_line(traced_build(min_dt_dropout_output, "", min_dt_dropout_output.DIMS[0])).startswith(
        "? checked 6 of 33 ops that could carry a layout bug; not checked (unnamed axes): #4 stack, ")


def test_one_map_for_the_batch_is_seeded_with_a_leading_one():
    """A positional map ``[1, D, Hp, Wp]`` (SAM's ``image_pe``, one map repeated over the batch by
    ``repeat_interleave``) is seeded ``[1, D, Hp, Wp]`` where its grid is declared. On 5774b39 no seed fitted a
    leading 1, so the keys' positional half of tests/corpus/public37/sam_two_way.py stayed unnamed ("? checked 57
    of 130 ops ... not checked (unnamed axes): #0 repeat_interleave, #3 flatten, #4 permute, ..."; now 60 of 130:
    what is left unnamed is its half-width cross-attention)."""
    pe, tokens = torch.randn(1, 32, 3, 4), torch.randn(2, 5, 32)
    with shapetrace.trace(dims="B=2 T=5 D=32 H=4 Hp=3 Wp=4") as t:
        torch.repeat_interleave(pe, tokens.shape[0], dim=0).flatten(2).permute(0, 2, 1)
    assert [e.outputs[0].dims for e in t.events] == [("B", "D", "Hp", "Wp"), ("B", "D", "N"), ("B", "N", "D")]
    with shapetrace.trace(dims="B=2 D=32 H=4 T=12") as t:   # (no grid declared: no seed)
        pe.flatten(2)
    assert t.events[0].outputs[0].dims == (None, None, None)
    line = verdict_line(traced_build(sam_two_way, "", sam_two_way.DIMS[0]))
    # (75 since round 48: the half-width projections are checked on what they read, their width the weight's rows;
    # the heads split from that width stay unchecked)
    assert line.startswith("? checked 75 of 130 ops that could carry a layout bug; not checked (unnamed axes): "
                           "#23 reshape, #24 transpose")


class _Steps(torch.nn.Module):
    def forward(self, x, steps):
        return x.transpose(1, 2), steps[:, None], torch.arange(2)[:, None] * 1.0   # (a [2] made here: no seed)


def test_a_one_axis_input_as_long_as_the_batch_is_seeded_batch():
    """A ``[B]`` given to the model beside its input (a diffusion timestep, a sequence's length per entry) is seeded
    ``[B]`` where no other declared name has the batch's size; on 5774b39 no seed fitted a tensor of one axis, so a
    timestep's embedding and a mask built from lengths stayed unnamed (reports7/mha_padding_inverted: "? 28 of 32
    (the lengths' batch unnamed)"). At B = H = 4 a ``[4]`` fits a batch and a head's scales alike: no name; a
    ``[2]`` the code makes at B = 2 (Griffin's ``arange(half)``, public20/griffin_local: read ``[B]`` it gave a
    false ✗ broadcast-mismatch on the correct file) is no input."""
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        _Steps()(torch.randn(2, 6, 32), torch.tensor([3.0, 7.0]))
    assert [e.outputs[0].dims for e in t.events if e.op == "__getitem__"] == [("B", None), (None, None)]
    with shapetrace.trace(dims="B=4 T=6 D=32 H=4") as t:   # (B = H: a size that fits two names names nothing)
        _Steps()(torch.randn(4, 6, 32), torch.tensor([3.0, 7.0, 1.0, 2.0]))
    assert [e.outputs[0].dims for e in t.events if e.op == "__getitem__"][0] == (None, None)
    assert verdict_line(traced_build(griffin_local, "", griffin_local.DIMS[0]))[0] == "?"


def test_a_sequence_channels_first_is_seeded_batch_own_features_tokens():
    """``[B, F_in, T]`` (a sequence as torch's ``Conv1d`` takes it: Stable Audio's latents ``[B, 8, T]``,
    tests/corpus/public37/stable_audio_dit.py) is seeded where its width is no declared or derived name's size;
    on 5774b39 the own-width seed read ``[B, T, F_in]`` only and that file was "? checked 14 of 72 ops" (now 67 of
    72: its timestep's Fourier features stay unnamed). A width another name has (d_k = 16) names nothing."""
    latents = torch.randn(2, 8, 6)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        latents.transpose(1, 2)
        torch.randn(2, 16, 6).transpose(1, 2)
    assert [e.outputs[0].dims for e in t.events] == [("B", "T", "F_in"), (None, None, None)]
    line = verdict_line(traced_build(stable_audio_dit, "", stable_audio_dit.DIMS[0]))
    assert line.startswith("? checked 67 of 72 ops that could carry a layout bug (2 of them on the values of the "
                           "rotary tables or causal masks they build); not checked (unnamed axes): #2 matmul, #3 cat")


def test_a_sequence_channels_first_is_seeded_batch_features_tokens():
    """``[B, D, T]`` (a sequence as torch's ``Conv1d`` takes it: tortoise-tts's ``AttentionBlock`` over a mel or
    latent signal) is seeded ``[B, D, T]``; on 190afd4 no seed fitted it, so tests/corpus/public39/tortoise_qkv.py
    was ``? checked 4 of 12 ops`` (the ``conv1d`` qkv, the ``bs * n_heads`` fold and its split unnamed) and its
    mask tiled head-major was ``?`` at B = T = H = 4. A ``[B, T, D]`` still reads batch, tokens, features first."""
    x = torch.randn(2, 64, 6)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        x.reshape(8, 16, 6)
        x.transpose(1, 2).reshape(2, 6, 4, 16)
    assert [e.outputs[0].dims for e in t.events] == [("B*H", "d_k", "T"), ("B", "T", "D"), ("B", "T", "H", "d_k")]
    t = traced_build(tortoise_qkv, "", "B=2 T=6 D=64 H=4")
    assert verdict_line(t).startswith("✓ checked all 12 ops that could carry a layout bug")
    assert round_outcome(tortoise_qkv, "mask-repeat-head-major", "B=4 T=4 D=64 H=4") == \
        ("✗", ("mask-wrong-batch-order",))


def test_a_sequence_first_steps_token_ids_are_seeded_one_batch():
    """ssw-nlp-study-group/nlp_study PR #2's correct GRU seq2seq (tests/corpus/reports29/nlp_study_softmax_batch.py):
    the decoder embeds one token per entry fed sequence-first, ``(1, B)``; on 5b19d5a no seed fitted it, the
    embedding's ``[1, 3, D]`` kept its batch unnamed and the file was ``? checked 12 of 13 ops ... not checked
    (unnamed axes): #2 embedding``. Its ids are now ``[1, B]``: ``✓``; the bug (softmax over the batch) stays ``✗``;
    at B = T = 4 the ``[1, 4]`` ids are not seeded (positions ``[1, T]`` fit as well: sizes never decide), and
    both stay ``?`` (seeded there, the bug read ``✗ broadcast-mismatch`` twice on a guessed name)."""
    from tests.corpus.reports29 import nlp_study_softmax_batch as module

    ids = torch.randint(1, 9, (1, 3))
    with shapetrace.trace(dims="B=3 T=6 D=32") as t:
        torch.nn.Embedding(9, 32)(ids)
    assert [e.outputs[0].dims for e in t.events] == [(None, "B", "D")]
    assert round_outcome(module, "", "B=3 T=6 D=32") == ("✓", ())
    assert round_outcome(module, "softmax-over-batch", "B=3 T=6 D=32") == ("✗", ("softmax-wrong-axis",))
    assert [round_outcome(module, bug, "B=4 T=4 D=32") for bug in ("", "softmax-over-batch")] == [("?", ())] * 2
    with shapetrace.trace(dims="B=4 T=4 D=32") as t:
        torch.nn.Embedding(9, 32)(torch.randint(1, 9, (1, 4)))
    assert [e.outputs[0].dims for e in t.events] == [(None, None, "D")]



def test_a_pair_representation_is_only_another_reading_of_equal_sizes():
    """OpenFold's triangle attention (tests/corpus/public45/openfold_triangle.py) on its pair ``[B, T, T, D]``: no
    seed names a pair alone (distinct sizes: ``?``, nothing named before the mask bias); at B = T = H = 4 its
    ``[4, 4, 4, 32]`` fit ``[B, H, T, D]`` and ``[B, T, H, D]``, both wrong, and both found errors: a false ``✗``
    on correct code on c203c72 (mask-hides-every-key, broadcast-mismatch, attends-over-wrong-axis). The pair is
    a third reading, under which nothing is found, so no finding rests on the order of equal sizes: ``?``; the
    bug that puts the mask on the queries is ``✗`` under every reading."""
    from tests.corpus.public45 import openfold_triangle

    assert round_outcome(openfold_triangle, "", "B=2 T=5 D=32 H=4") == ("?", ())
    assert round_outcome(openfold_triangle, "", "B=4 T=4 D=32 H=4") == ("?", ())
    assert round_outcome(openfold_triangle, "mask-bias-on-queries", "B=4 T=4 D=32 H=4") == ("✗", ("mask-wrong-axis",))


def test_a_batch_first_steps_token_ids_are_seeded_batch_one():
    """The next token's ids fed batch-first, ``(B, 1)``, as ``generate`` feeds them after a prefill
    (tests/corpus/public48/gpt2_past_step.py, transformers' GPT-2 with its tuple cache): on f946d52 no seed fitted
    them, the step's embedding ``[2, 1, D]`` kept its batch unnamed and the file was ``? checked 46 of 52 ...
    not checked (unnamed axes): #27 embedding, ...``. They are ``[B, 1]`` now (the token axis of one entry needs
    no name): ``✓``. At B = T = 4 a ``[4, 1]`` is not seeded (positions ``[T, 1]`` fit as well)."""
    ids = torch.randint(1, 9, (3, 1))
    with shapetrace.trace(dims="B=3 T=6 D=32") as t:
        torch.nn.Embedding(9, 32)(ids)
    assert [e.outputs[0].dims for e in t.events] == [("B", None, "D")]
    with shapetrace.trace(dims="B=4 T=4 D=32") as t:
        torch.nn.Embedding(9, 32)(torch.randint(1, 9, (4, 1)))
    assert [e.outputs[0].dims for e in t.events] == [(None, None, "D")]


def test_a_batch_of_sets_of_sequences_is_seeded_batch_sets_tokens():
    """``[B, N, T]`` ids and ``[B, N, T, D]`` features, N declared wherever it stands among the declared names (a
    user's clicked titles in NRMS, tests/corpus/public48/nrms_user_encoder.py; the Crossformer's variates of
    segments, tests/corpus/public45/crossformer_tsa.py): on f946d52 no seed fitted either, and both files were
    ``? checked 0 of ...`` (nothing named). Folded ``(B*N, T)`` they are named so, and NRMS's ``unfold-set-major``
    (the fold read back set-major) is ``✗ mixed-axis`` at last."""
    ids, x = torch.randint(1, 9, (2, 3, 5)), torch.randn(2, 3, 5, 16)
    with shapetrace.trace(dims="B=2 T=5 D=16 H=4 N=3") as t:
        ids.reshape(6, 5)
        x.reshape(6, 5, 16)
    assert [e.outputs[0].dims for e in t.events] == [("B*N", "T"), ("B*N", "T", "D")]
    with shapetrace.trace(dims="B=2 T=5 D=16 H=4") as t:   # (no N declared: no seed)
        x.reshape(6, 5, 16)
    assert t.events[0].outputs[0].dims[:2] == (None, None)
