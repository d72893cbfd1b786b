"""shapetrace/engine/axis_compute.py: the names and roles a product gives its result.

x-transformers' talking heads mix the heads of the scores with a learned ``(H, H)`` matrix,
``einsum('b h i j, h k -> b k i j', dots, W)``: the queries and keys stay where they were, but the einsum
dropped their roles, so the causal mask laid on the mixed scores was read on no query or key axis and a
``triu(0)`` mask that hides each query's own key was ``?`` on 14a2e35 (branch r11's first commit)
(tests/corpus/public11/talking_heads.py); now ``✗ causal-mask-hides-itself``."""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine.axes import root_axis, unknown_axis
from shapetrace.engine.axis_compute import einsum_axes
from shapetrace.engine.namer import Namer
from shapetrace.engine.op_args import parse_einsum

NAMER = Namer({"B": 2, "T": 6, "D": 64, "H": 4})
B, H, T = root_axis("B", 2), root_axis("H", 4), root_axis("T", 6)
SCORES = (B, H, T.with_role("query"), T.with_role("key"))


def _roles(equation: str, *operands) -> list[str | None]:
    return [a.role for a in einsum_axes(parse_einsum(equation), operands, NAMER)]


def test_an_einsum_that_keeps_both_score_axes_keeps_their_roles():
    mix = (unknown_axis(4), unknown_axis(4))
    assert _roles("bhij,hk->bkij", SCORES, mix) == [None, None, "query", "key"]
    assert _roles("bhij->bhji", SCORES) == [None, None, "key", "query"]


def test_an_einsum_that_sums_over_the_keys_keeps_no_roles():
    v = (B, H, T, root_axis("d_k", 16))
    assert _roles("bhij,bhjd->bhid", SCORES, v) == [None, None, None, None]


def test_the_causal_mask_on_talking_heads_is_read():
    from tests.corpus.helpers import error_kinds, traced_build
    from tests.corpus.public11 import talking_heads

    t = traced_build(talking_heads, "causal-diagonal", "B=2 T=6 D=64 H=4")
    assert error_kinds(t) == ["causal-mask-hides-itself"]
    assert t.diagnostics[0].message.startswith("masked_fill #12 hides, along the keys (axis -1, T) of the scores "
                                               "[B=2, 4, T=6, T=6], each query's own key as well")
    assert error_kinds(traced_build(talking_heads, "", "B=2 T=6 D=64 H=4")) == []


def test_a_conv_over_raw_channels_names_no_fused_width():
    """transformers' wav2vec2 feature encoder (tests/corpus/public12/wav2vec2.py): a conv from one channel of raw
    audio to 32 channels, at D = 64, H = 4 (d_k = 16). 32 is 2·d_k by size alone, and on 785fd9a the table
    printed ``[B=2, 2·d_k=32, N=13]``: a name that may be wrong. A fused width (3·D, 2·d_k) is read off
    projected features only; a conv of named features keeps it, and a stem's width D stays D."""
    from shapetrace.engine.axis_compute import conv_axes

    batch = root_axis("B", 2)
    audio = (batch, unknown_axis(1), unknown_axis(70))
    assert [NAMER.label(a) for a in conv_axes(audio, (2, 32, 13), NAMER, weight=(32, 1, 10))] == ["B", None, "N"]
    assert NAMER.label(conv_axes(audio, (2, 64, 13), NAMER, weight=(64, 1, 10))[1]) == "D"   # a stem's width
    features = (batch, root_axis("D", 64), unknown_axis(13))
    assert NAMER.label(conv_axes(features, (2, 192, 13), NAMER, weight=(192, 64, 1))[1]) == "3*D"   # fused q, k, v


# -- a projection's own width: F (lib13) -------------------------------------------------------------------

def _labels(axes) -> tuple:
    return tuple(NAMER.label(a) for a in axes)


def test_a_projection_to_a_width_no_name_has_is_F():
    """An MLP's hidden 4·D (256 at D = 64) was unnamed on 8110233, so fc1/fc2 of GPT-2, GPT-Neo, GPT-J, Bloom,
    Falcon and timm's ViT were '?': the width is F, and projected back it is D again."""
    from shapetrace.engine.axis_compute import linear_axes

    hidden = linear_axes((B, T, root_axis("D", 64)), 256, NAMER)
    assert _labels(hidden) == ("B", "T", "F")
    assert _labels(linear_axes(hidden, 64, NAMER)) == ("B", "T", "D")
    assert _labels(linear_axes(hidden, 10, NAMER)) == ("B", "T", "F")     # a classifier's outputs


def test_a_width_that_a_name_has_is_never_F():
    """Equal sizes never decide a name: a width of T's 6 entries, H's 4, 2·D, or an F declared at another
    size stays unnamed; an input whose features are unnamed gives no F either."""
    from shapetrace.engine.axis_compute import linear_axes, projected_width

    x = (B, T, root_axis("D", 64))
    assert [_labels(linear_axes(x, n, NAMER))[-1] for n in (6, 4, 128, 192)] == [None, None, "2*D", "3*D"]
    assert NAMER.label(projected_width(Namer({"B": 2, "T": 6, "D": 64, "H": 4, "F": 100}), 256)) is None
    assert NAMER.label(projected_width(NAMER, 1)) is None
    assert _labels(linear_axes((B, T, unknown_axis(64)), 256, NAMER)) == ("B", "T", None)


def test_a_weights_width_of_the_batchs_size_is_F():
    """ESIM's classifier (tests/corpus/reports5/esim_pool_features.py): ``Linear(D, 2)`` on ``[B, D]`` at B = 2. A
    module's weight is made before any batch is seen, so its rows are never the batch: the 2 classes are ``F``
    (on c32db91 unnamed, the file ``? 25 of 26``). A width of T's or H's size still stays unnamed."""
    from shapetrace.engine.axis_compute import linear_axes

    namer = Namer({"B": 2, "T": 6, "D": 32, "H": 4})
    x = (root_axis("B", 2), root_axis("D", 32))
    assert [_labels(linear_axes(x, n, namer)) for n in (2, 6, 4)] == [("B", "F"), ("B", None), ("B", None)]


def test_broadcasting_F_against_another_name_names_neither():
    """``q * cat((theta, theta)).cos()`` with ``theta`` a projection of x: F+F lined up with d_k. F has no
    role, so no rule can judge the pairing; the result's axis is unnamed (before: a false
    ``broadcast-mismatch`` where F was features, or a check mark where it had no role). Two F of one width
    (a gated MLP's ``gate * up``) keep F."""
    from shapetrace.engine.axis_compute import broadcast_axes, linear_axes

    x = (B, T, root_axis("D", 64))
    f = linear_axes(x, 256, NAMER)
    assert _labels(broadcast_axes([f, f], (2, 6, 256))) == ("B", "T", "F")
    theta = linear_axes(x, 40, NAMER)                  # a width no name has: F
    head_features = (B, T, root_axis("d_k", 40))
    assert _labels(theta)[-1] == "F"
    assert _labels(broadcast_axes([head_features, theta], (2, 6, 40))) == ("B", "T", None)
    assert _labels(broadcast_axes([theta, head_features], (2, 6, 40))) == ("B", "T", None)
    assert _labels(broadcast_axes([head_features, head_features], (2, 6, 40))) == ("B", "T", "d_k")


def test_a_decode_steps_one_query_is_the_query_axis_of_its_scores():
    """``[B, H, 1, d_k] @ [B, H, d_k, T+1]``: the unnamed row of size 1 is one query (its contracted axis is
    a head's features, its columns tokens); no role on 67c283c, so a mask added to a decode step's scores
    was read by no rule (tests/corpus/reports15/c2c_decode_mask_column.py)."""
    from shapetrace.engine.axis_compute import broadcast_axes, matmul_axes

    d_k, keys = root_axis("d_k", 8), root_axis("T", 6)
    scores = matmul_axes((B, H, unknown_axis(1), d_k), (B, H, d_k, keys), (2, 4, 1, 6), NAMER)
    assert [a.role for a in scores] == [None, None, "query", "key"]
    assert [a.role for a in matmul_axes((B, H, unknown_axis(1), root_axis("D", 64)), (B, H, root_axis("D", 64), keys),
                                        (2, 4, 1, 6), NAMER)] == [None, None, None, None]
    mask = (B, unknown_axis(1), unknown_axis(1), unknown_axis(1))
    assert [a.role for a in broadcast_axes([scores, mask], (2, 4, 1, 6))] == [None, None, "query", "key"]


def test_an_inputs_own_width_is_features_to_a_modules_projection():
    """``F_in`` (the width of an input no declared name has: tests/engine/test_infer_seeds.py) is read as
    features: a module's projection of it to D's width is D, to a fused width 3·D, to a width no name has F,
    and to its own width F too (never F_in: the input's features are not what the weight makes); a weight
    that is no module's parameter names nothing."""
    from shapetrace.engine.axis_compute import linear_axes

    x = (B, T, root_axis("F_in", 3))
    assert [_labels(linear_axes(x, n, NAMER))[-1] for n in (64, 192, 3, 40, 6)] == ["D", "3*D", "F", "F", None]
    assert _labels(linear_axes(x, 64, NAMER, structural=False)) == ("B", "T", None)


def test_a_range_of_a_width_of_its_own_is_features_to_a_modules_projection():
    """``F[32:48]`` (gMLP's tiny attention's values, a chunk of ``to_qkv``'s F) and ``F_in[2:14]`` (Pix2Struct's
    patches after their row and column ids) are features to the module's projection that reads them: D at the
    model's width, F at a width no name has, unnamed at d_k's (16 at D = 64, H = 4: never their own label at their
    own width). On fa53f62 a range of
    F gave unnamed features (tests/corpus/public19/gmlp_sgu.py was ? 13 of 14, now ✓ all 14); a range of a
    declared name is read as before (``T[0:3]``, tokens: unnamed)."""
    from shapetrace.engine.axes import sliced
    from shapetrace.engine.axis_compute import linear_axes

    for whole in (root_axis("F", 48), root_axis("F_in", 48)):
        part = sliced(whole, 16, NAMER, start=32)
        assert NAMER.label(part) == f"{NAMER.label(whole)}[32:48]"
        assert [_labels(linear_axes((B, T, part), n, NAMER))[-1] for n in (64, 40, 16)] == ["D", "F", None]
    tokens = sliced(root_axis("T", 6), 3, NAMER, start=0)
    assert _labels(linear_axes((B, T, tokens), 64, NAMER))[-1] is None


def test_copies_meeting_an_axis_whose_values_vary_are_copies_no_more():
    """NEZHA's ``NezhaRelativePositionsEncoding`` (transformers v4.40) builds ``range_mat = arange(L).repeat(L).view(L,
    L)`` (its first axis ``repeat``'s copies) and ``range_mat - range_mat.t()``: the distances vary along both axes.
    On 69fb7a4 the difference kept copies on both (labelled ``16``, a name no use proves) and the table cut ``[:T,
    :T]`` from it was ``[16[0:6], 16[0:6], 8]``, so ``shapetrace trace`` (which builds the model under the trace)
    said ``✗ batch-mismatch`` on correct NEZHA (round 35). Copies only stay where every operand has copies (or
    one entry) there."""
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        a = torch.arange(16).repeat(16).view(16, 16)
        (a - a.t()).unsqueeze(0)
        (a + 1).unsqueeze(0)
    distances, shifted = [e.outputs[0].dims for e in t.events if e.op == "unsqueeze"]
    assert distances == (None, None, None)
    assert shifted == (None, "16", None)          # (copies plus a scalar are still copies)


def _gated(split_pieces: bool):
    """Mamba's gate: ``in_proj`` to a width of its own (``F`` = 257), ``split`` into two pieces of 128 and one,
    the first times the SiLU of the second (or of itself), ``out_proj`` back to D, added to the input."""
    torch.manual_seed(0)
    in_proj, out_proj = torch.nn.Linear(64, 257), torch.nn.Linear(128, 64)
    x = torch.randn(2, 6, 64)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        shapetrace.name(x, "B T D")
        a, b, _ = in_proj(x).split([128, 128, 1], dim=-1)
        x + out_proj(a * torch.nn.functional.silu(b if split_pieces else a))
    return t


def test_two_pieces_of_one_projection_gated_keep_their_features_named():
    """Two pieces of one projection's width met elementwise (``F[0:128]`` times ``F[128:256]``: Mamba's ``z``
    gate, Bamba's mixer, Jamba's, a GLU's halves) pair feature i with feature i as the weight's rows were laid
    out, and any order of the rows is another weight: the product keeps the first piece's name, and ``out_proj``
    makes ``D`` from it. On eefe532 the product's features were unnamed, ``out_proj`` with them (``? checked 2 of
    3 ops; not checked (unnamed axes): #2 linear``); the same piece met by itself was ✓ there as here."""
    for split_pieces in (True, False):
        t = _gated(split_pieces)
        assert [tuple(o.dims) for o in t.events[-1].outputs] == [("B", "T", "D")]
        assert t.report().verdict.line.startswith("✓ checked all 3 ops that could carry a layout bug")
