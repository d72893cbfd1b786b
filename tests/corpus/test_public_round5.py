"""A fifth round of files in the styles of public code (tests/corpus/public5, each citing its source),
traced at distinct sizes and at B = T = H = 4 as a held-out set traces them (issue 33): no ``✓`` on a
buggy file, no error on a correct one, and the classes this round found, each failing on fd76091:

* a projection's output named by its width alone (DiT's final layer where p·p·c = D) is unnamed
  unless a use proves it (:mod:`shapetrace.engine.infer.widths`): ``unpatchify`` is not a mix;
* a mask that leaves a whole batch entry nothing to attend to (BERT's extended mask not inverted);
* a causal mask that hides each query's own key (CLIP's ``triu(0)`` for ``triu(1)``);
* ``F.normalize`` of per-head queries along the tokens (Swin v2's cosine attention with ``dim=-2``)."""

from __future__ import annotations

import math

import pytest
import torch

import shapetrace
from shapetrace import NOT_ASKED
from tests.corpus.helpers import error_kinds as errors
from tests.corpus.helpers import traced_build as traced
from tests.corpus.helpers import without_order_caveat
from tests.corpus.public5 import (
    bert_self,
    clip_text,
    clip_vision,
    deepseek_mla,
    diffusers_attn,
    mpt_alibi,
    perceiver,
    swinv2_cosine,
    whisper,
    xformers_ref,
)
from tests.corpus.vision import dit

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"

DISTINCT, EQUAL = "B=2 T=6 D=32 H=4", "B=4 T=4 D=32 H=4"


def line(t) -> str:
    return t.report().verdict.line


# -- DiT: a final projection whose width p·p·c happens to equal D --------------------------------------

def dit_traced(bug: str = ""):
    # facebookresearch/DiT models.py: FinalLayer's linear(hidden, p*p*c) then unpatchify's
    # reshape(N, h, w, p, p, c) and einsum('nhwpqc->nchpwq'); here hidden 16 = 2·2·4
    torch.manual_seed(0)
    model = dit.DiT(hidden=16, heads=2, patch=2, channels=4, bug=bug).eval()
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=16 D=16 H=2") as t:
        model(torch.randn(2, 4, 8, 8), torch.tensor([3.0, 500.0]))
    return t


def test_dit_unpatchify_of_a_model_width_projection_is_not_a_mix():
    """fd76091 named the final projection's output D by its width, split it into H and pieces of D, and
    ended ``✗ mixed-axis`` ("Wp and D/4%2 ... mix different tokens") on correct code."""
    t = dit_traced()
    assert errors(t) == []
    final = [e for e in t.events if "self.unpatchify(self.final(x))" in e.code and e.op == "linear"][-1]
    assert final.outputs[0].dims == ("B", "N", None)
    assert [e.outputs[0].dims for e in t.events[-3:]] == [
        ("B", "Hp", "Wp", None, None, None), ("B", None, "Hp", None, "Wp", None), ("B", None, None, None)]
    # (19 since round 48: the final projection is checked on what it reads, its unnamed width the weight's rows)
    assert line(t).startswith("? checked 19 of 35 ops that could carry a layout bug; not checked (unnamed axes)")


def test_dit_unpatchify_in_the_wrong_order_gets_no_check_mark():
    # the twin: einsum('nhwpqc->nchwpq') (patch rows not interleaved with the grid's)
    assert not line(dit_traced("unpatchify-order")).startswith("✓")


def test_a_width_name_a_use_proves_is_kept():
    """The twin of the mechanism: ``q = self.q_proj(x)`` viewed ``(B, H, T, d_k)`` without the transpose
    at T = 4, H = 16 regroups whole tokens with a slice of D, and attention reads the result: the name
    stands and so does the finding (the FuxiCTR #30 class)."""
    lin = torch.nn.Linear(512, 512)
    x = torch.randn(2, 4, 512)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=4 D=512 H=16") as t:
        q = lin(x).view(2, 16, 4, 32)                     # bug: (B, H?, T?, d_k)
        k = lin(x).view(2, 4, 16, 32).transpose(1, 2)     # (B, H, T, d_k)
        (q @ k.transpose(-2, -1)).softmax(-1)
    assert "mixed-axis" in errors(t)


# -- BERT: the extended mask not inverted ----------------------------------------------------------------

@pytest.mark.parametrize("dims,blind", [(DISTINCT, "1 slice"), (EQUAL, "3 slices")])
def test_bert_mask_not_inverted_hides_a_whole_sequence(dims, blind):
    """transformers' get_extended_attention_mask computes ``(1.0 - mask) * finfo.min``; without ``1.0 -``
    the real tokens are hidden. fd76091: ``✓ checked all 19 ops`` on this bug."""
    t = traced(bert_self, "mask-not-inverted", dims)
    assert errors(t) == ["mask-hides-every-key"]
    d = t.diagnostics[0]
    assert d.message.startswith(f"add #12 hides every key from every query in {blind} of the scores")
    assert line(t) == "✗ 1 error: the findings above say where and how to fix it"


def test_bert_extended_mask_is_silent():
    t = traced(bert_self, "", DISTINCT)
    assert t.diagnostics == []
    assert line(t).startswith("✓ checked all 19 ops that could carry a layout bug")


# -- CLIP: the causal mask off by one ------------------------------------------------------------------

def test_clip_causal_mask_that_hides_the_diagonal_is_an_error():
    """openai/CLIP builds ``mask.triu_(1)``; ``triu(0)`` hides each token from itself and leaves the first
    query nothing (finfo.min, not -inf: no NaN to see). fd76091: ``?`` with no finding."""
    t = traced(clip_text, "mask-diagonal", DISTINCT)
    assert errors(t) == ["causal-mask-hides-itself"]
    assert t.diagnostics[0].message.startswith(
        "add #25 hides, along the keys (axis -1, T) of the scores [B=2, H=4, T=6, T=6], each query's own key")
    assert line(t) == "✗ 1 error: the findings above say where and how to fix it"


def test_a_causal_mask_from_a_left_padded_batch_is_not_hiding_itself():
    """The twin: transformers' 4-d mask for a left-padded batch under a causal mask hides whole rows of
    the padded queries (their own key included): a pattern other than ``triu(0)``, and no entry blind."""
    scores = torch.randn(2, 2, 4, 4)
    causal = torch.full((4, 4), torch.finfo(torch.float32).min).triu(1)
    pad = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]])
    mask = causal[None, None] + (1.0 - pad[:, None, None, :]) * torch.finfo(torch.float32).min
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=2 T=4") as t:
        shapetrace.name(scores, "B H T T")
        (scores + mask.clamp(min=torch.finfo(torch.float32).min)).softmax(-1)
    assert errors(t) == []


# -- every file of the round, at distinct sizes and at B = T = H = 4 ------------------------------------

CORRECT = [(clip_text, DISTINCT), (bert_self, DISTINCT), (mpt_alibi, DISTINCT), (xformers_ref, DISTINCT),
           (swinv2_cosine, DISTINCT), (diffusers_attn, "B=2 D=32 Hp=3 Wp=4 S=5 H=4 C:features=24"),
           (perceiver, "B=2 T=7 L=5 D=32 H=4 C:features=24"), (whisper, "B=2 T=6 S=5 D=32 H=4"),
           (deepseek_mla, DISTINCT), (clip_vision, "B=2 D=32 H=4")]
BUGGY = [(clip_text, "mask-diagonal"), (clip_text, "no-transpose"), (bert_self, "mask-on-queries"),
         (bert_self, "mask-not-inverted"), (mpt_alibi, "alibi-sign"), (mpt_alibi, "alibi-queries"),
         (xformers_ref, "unfold-order"), (swinv2_cosine, "normalize-tokens"), (swinv2_cosine, "bias-unpermuted"),
         (diffusers_attn, "no-permute"), (diffusers_attn, "heads-first"), (perceiver, "mask-heads-first"),
         (perceiver, "softmax-latents"), (whisper, "cross-mask"), (deepseek_mla, "kv-no-transpose"),
         (clip_vision, "no-permute")]


def _equal(dims: str) -> str:
    return " ".join(f"{k}=4" if k in ("B", "T", "H") else kv for kv in dims.split() for k in [kv.split("=")[0]])


@pytest.mark.parametrize("module,dims", [pytest.param(m, d, id=m.__name__.rsplit(".", 1)[1]) for m, d in CORRECT])
@pytest.mark.parametrize("equal", [False, True], ids=["distinct", "B=T=H=4"])
def test_correct_files_have_no_error(module, dims, equal):
    t = traced(module, "", _equal(dims) if equal else dims)
    assert errors(t) == []


@pytest.mark.parametrize("module,bug", [pytest.param(m, b, id=f"{m.__name__.rsplit('.', 1)[1]}-{b}") for m, b in BUGGY])
@pytest.mark.parametrize("equal", [False, True], ids=["distinct", "B=T=H=4"])
def test_buggy_files_get_no_check_mark(module, bug, equal):
    dims = dict(CORRECT)[module]
    t = traced(module, bug, _equal(dims) if equal else dims)
    assert not line(t).startswith("✓"), line(t)


@pytest.mark.parametrize("dims", ["B=1 T=6 S=5 D=32 H=4", "B=1 T=4 S=4 D=32 H=4"])
def test_whisper_positions_counted_by_the_batch_get_no_check_mark(dims):
    # openai/whisper's decoder slices positional_embedding by x.shape[-1]; x.shape[0] is the batch
    # (at B = 1 it broadcasts: every token at position 0)
    assert not line(traced(whisper, "positions-from-batch", dims)).startswith("✓")


def test_mpt_alibi_that_rewards_distance_is_an_error():
    # llm-foundry build_alibi_bias: alibi_bias.abs().mul(-1); .abs() alone favours the farthest keys
    t = traced(mpt_alibi, "alibi-sign", EQUAL)
    assert errors(t) == ["distance-bias-reversed"]


# -- Swin v2: cosine attention normalised along the wrong axis -------------------------------------------

def test_swinv2_queries_normalised_over_the_tokens_is_a_warning():
    """microsoft/Swin-Transformer swin_transformer_v2.py: ``F.normalize(q, dim=-1)``; ``dim=-2`` scales
    each feature over the window's tokens. fd76091: ``?`` with no finding."""
    t = traced(swinv2_cosine, "normalize-tokens", DISTINCT)
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("warning", "normalised-over-tokens")]
    assert t.diagnostics[0].message.startswith(
        "normalize #7 divides the per-head vectors [B=2, H=4, T=6, d_k=8] by their norm along axis 2 (T, the tokens)")
    # (#20 adds the bias [1, H, 6, 6] with two unnamed axes: how they line up with the scores is not checked;
    # #0 cat joins parameters alone, the q and v biases: no op that can carry a layout bug)
    assert line(t) == ("! no errors, 1 warning; checked 15 of 24 ops that could carry a layout bug; not checked "
                       "(unnamed axes): #11 linear, #12 linear, #13 view, #14 view and 5 more" + UNASKED)


def test_swinv2_cosine_attention_is_silent():
    # the twin: both normalised over their features (dim=-1)
    assert traced(swinv2_cosine, "", DISTINCT).diagnostics == []


@pytest.mark.parametrize("dims,shape", [(DISTINCT, "[6, 6, 4] into [H=4, 6, 6]"),
                                        ("B=3 T=4 D=32 H=8", "[4, 4, 8] into [H=8, 4, 4]")])
def test_swinv2_bias_table_viewed_without_its_permute_is_mixed_axis(dims, shape):
    """microsoft/Swin-Transformer swin_transformer_v2.py: the continuous position bias ``[N, N, H]``
    (the MLP's H outputs, rows picked by relative position) ``view``-ed ``[H, N, N]`` without
    ``permute(2, 0, 1)``. Its axis added along the scores' heads is the heads; the view cuts it across
    the table's axes. f3b2c69: ``?`` with no finding."""
    t = traced(swinv2_cosine, "bias-unpermuted", dims)
    assert [(d.severity, d.kind, d.event) for d in t.diagnostics if d.kind != "ambiguous-sizes"] == [
        ("error", "mixed-axis", 18)]
    assert t.diagnostics[0].message.startswith(f"view #18 turns the table {shape}: axis 0 is added along the heads")
    assert t.diagnostics[0].fix == ("Move the table's axis of " + shape.split("[H=")[1].split(",")[0] +
                                    " into place with .permute(2, 0, 1) (then .contiguous()) instead of a view.")
    assert line(t) == "✗ 1 error: the findings above say where and how to fix it"


def test_swinv2_bias_table_is_named_heads_where_it_meets_the_scores():
    # the twin: permute(2, 0, 1), named from the add back to the table's view (its last axis the heads)
    t = traced(swinv2_cosine, "", DISTINCT)
    assert [e.outputs[0].dims for e in t.events[16:20]] == [
        (None, None, "H"), ("H", None, None), ("H", None, None), (None, "H", None, None)]


@pytest.mark.parametrize("bug", ["", "bias-unpermuted"])
def test_swinv2_bias_table_at_b_t_h_4_is_not_named(bug):
    # windows of 2 × 2: the table is [4, 4, 4]; which axis is the heads is not proven, so no name, no finding
    t = traced(swinv2_cosine, bug, EQUAL)
    assert all(d.kind != "mixed-axis" for d in t.diagnostics)
    assert all("H" not in e.outputs[0].dims for e in t.events[12:20])
    assert line(t).startswith("? checked ")


def test_clip_vision_transformer_fed_batch_first_attends_over_the_batch():
    # openai/CLIP model.py permutes NLD -> LND for nn.MultiheadAttention; without it the batch is the sequence
    t = traced(clip_vision, "no-permute", "B=2 D=32 H=4")
    assert errors(t) == ["attends-over-batch"]


def test_a_triangle_over_more_keys_than_queries_is_not_read_as_hiding_each_query():
    """openai/whisper's causal ``mask[:n_ctx, :n_ctx]`` cut to the audio's 5 frames for 4 tokens (the
    ``cross-mask`` slip): where each query's own key lies among more keys depends on the alignment, so
    ``triu(1)`` there is not called a mask that hides each query from itself."""
    t = traced(whisper, "cross-mask", "B=4 T=4 S=5 D=32 H=4")
    assert "causal-mask-hides-itself" not in {d.kind for d in t.diagnostics}
    assert not line(t).startswith("✓")


@pytest.mark.parametrize("dims,q,k", [("B=2 T=6 S=5 D=32 H=4", 6, 5), ("B=4 T=4 S=5 D=32 H=4", 4, 5)])
def test_whisper_causal_mask_reused_in_the_cross_attention_is_an_error(dims, q, k):
    """openai/whisper's decoder ``mask`` buffer (``triu_(1)`` over n_text_ctx) given to the
    cross-attention too and cut ``mask[:n_ctx, :n_audio]`` (the ``cross-mask`` slip): its rows and its
    columns are one sequence's positions, the cross-attention's keys are audio frames. 742b81f: ``?`` with
    no finding."""
    t = traced(whisper, "cross-mask", dims)
    assert errors(t) == ["causal-mask-across-sequences"]
    assert [without_order_caveat(d.message, q == 4) for d in t.diagnostics if d.severity == "error"] == [
        f"add #52 puts a causal mask [T={q}, N={k}], cut from the corner of the square table [12, 12] (each query "
        f"i hides the keys after key i), onto the scores [B={dims[2]}, H=4, T={q}, N={k}], whose keys (N) are another "
        "sequence than its queries (T): a mask built for an attention over one sequence is given to an attention "
        "across two, so later keys of N are hidden from earlier queries of T for no reason."]
    assert line(t) == "✗ 1 error: the findings above say where and how to fix it"


class _CrossAttention(torch.nn.Module):
    """The twins: a decoder's cross-attention given its own keys' padding mask (the Annotated
    Transformer's ``src_mask``, ``[B, 1, 1, S]``), and a decoder's self-attention over a cache whose mask
    is cut from the square table's last rows (huggingface/transformers ``_make_causal_mask`` with
    ``past_key_values_length``: query i sits at key ``past + i``)."""

    def __init__(self, D=32, H=4):
        super().__init__()
        self.q, self.kv, self.H = torch.nn.Linear(D, D), torch.nn.Linear(D, 2 * D), H
        self.register_buffer("causal", torch.full((12, 12), float("-inf")).triu(1))   # (L, L)

    def forward(self, x, memory, pad):
        B, T, D = x.shape
        S = memory.shape[1]
        q = self.q(x).view(B, T, self.H, D // self.H).transpose(1, 2)                  # (B, H, T, d)
        k, v = self.kv(memory).view(B, S, 2, self.H, D // self.H).permute(2, 0, 3, 1, 4)   # (B, H, S, d) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // self.H)                      # (B, H, T, S)
        if pad is None:   # keys are the cache (S - T past tokens) and x: the causal table's last T rows
            scores = scores + self.causal[S - T:S, :S]                                 # (T, S)
        else:
            scores = scores.masked_fill(pad[:, None, None, :] == 0, float("-inf"))     # (B, 1, 1, S)
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)               # (B, T, D)


@pytest.mark.parametrize("dims", ["B=2 T=4 S=5 D=32 H=4", "B=4 T=4 S=5 D=32 H=4"])
def test_a_cross_attention_with_its_own_padding_mask_and_a_cache_mask_are_silent(dims):
    n = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in dims.split()}
    torch.manual_seed(0)
    model, x, memory = _CrossAttention(), torch.randn(n["B"], n["T"], 32), torch.randn(n["B"], n["S"], 32)
    pad = torch.ones(n["B"], n["S"], dtype=torch.long)
    pad[-1, -1] = 0
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(memory, "B S D")
        model(x, memory, pad)
        model(x, torch.cat([torch.randn(n["B"], 1, 32), x], 1), None)   # a cache of one past token
    assert "causal-mask-across-sequences" not in {d.kind for d in t.diagnostics}
    assert errors(t) == []


def test_diffusers_heads_read_as_the_batch_say_what_the_projection_mixes():
    """diffusers' ``batch_to_head_dim`` read as ``(h, b)`` (the ``heads-first`` slip): the features then
    hold batch entries, not tokens; fd76091 said "which holds tokens". Since names1 the text context ``[B, S, C]``
    is seeded (``C:features=24`` declared), so the mixed axis is named by its pieces, not ``?``."""
    t = traced(diffusers_attn, "heads-first", "B=2 D=32 Hp=3 Wp=4 S=5 H=4 C:features=24")
    found = [d for d in t.diagnostics if d.kind == "projection-over-tokens"]
    assert len(found) == 1
    assert ("linear #22 projects [H%2=2, N=12, B·H/2·d_k=32] over its last axis (B and H/2 and d_k), which holds "
            "batch entries: the projection mixes different batch entries into each output feature.") \
        in found[0].message


# -- the dependency contracts: where they are not measured, and why (pinned) ----------------------------

def _contracts(module, bug: str = "") -> tuple[list[str], list[str]]:
    model, inputs = module.build(bug)
    t = shapetrace.trace(dims=DISTINCT)
    t.check_dependencies()
    with torch.no_grad(), t:
        model(*inputs)
    return t.contracts, t.unmeasured


def _trace_of_script(module):
    from shapetrace.app.script import run_script

    return run_script(module.__file__, dims={"B": 2, "T": 6, "D": 32, "H": 4}).trace   # as `shapetrace trace FILE`


def _contracts_of_script(module) -> tuple[list[str], list[str]]:
    t = _trace_of_script(module)
    return t.contracts, t.unmeasured


_HELD = ["batch entries stay apart", "each token depends on itself", "the causal mask holds"]


def test_deepseek_mla_called_with_positions_made_outside_the_trace_has_its_contracts_measured():
    assert _contracts(deepseek_mla) == (_HELD, ["heads (the model cannot take a copy of its batch per head)"])


def test_clip_text_on_token_ids_has_its_batch_contract_measured_where_the_ids_become_floats():
    """CLIP text's only input is integer token ids: 742b81f measured nothing and said nothing (the probe
    moved floating-point inputs only). The ids are now moved at ``token_embedding`` (:mod:`.probe_inputs`);
    the output is pooled at the end-of-text token (``hidden[arange(B), eot]``, now named ``[B, D]``), so
    the batch contract is read and the token contracts are said not to be."""
    assert _contracts(clip_text) == ([_HELD[0]], [
        "heads (the model cannot take a copy of its batch per head)",
        "each token depends on itself, the causal mask holds (the output has no token axis)"])


def test_deepseek_mla_run_as_a_script_has_its_contracts_measured():
    """DeepSeek-V2 run as a script builds its position_ids inside the trace (``arange(T).unsqueeze(0)
    .expand(B, T)``): unnamed, one axis as long as the batch, the same values all along it. 742b81f
    measured nothing here and the verdict said nothing of it; cut to entry 0 along that axis, every
    token contract is measured (:func:`shapetrace.engine.probe_inputs.companions`)."""
    assert _contracts_of_script(deepseek_mla) == (_HELD, ["heads (the model cannot take a copy of its batch per head)"])


def _deepseek_with_positions(B: int, T: int, positions):
    model = deepseek_mla.build("", B=B, T=T)[0]
    torch.manual_seed(0)
    x = torch.randn(B, T, 32)
    t = shapetrace.trace(dims=f"B={B} T={T} D=32 H=4")
    t.check_dependencies()
    with torch.no_grad(), t:
        shapetrace.name(x, "B T D")
        model(x, positions(B, T))
    return t


def test_positions_whose_batch_axis_cannot_be_told_are_said_not_measured():
    """The twin, where the cut could not be told right: at B = T = 4 the expanded positions, built under the trace
    before the model's call and seeded there as its argument, are named by sizes alone (sizes never decide which
    axis is the batch)."""
    t = _deepseek_with_positions(4, 4, lambda B, T: torch.arange(T).unsqueeze(0).expand(B, T))
    assert t.contracts == []
    assert t.unmeasured[0] == (
        "batch entries stay apart, each token depends on itself (names were found from sizes alone, and the batch "
        "and the tokens are as long as each other)")
    assert f"not measured: {t.unmeasured[0]}" in t.report().verdict.line


def test_expanded_positions_at_distinct_sizes_are_cut_to_entry_zero():
    t = _deepseek_with_positions(2, 6, lambda B, T: torch.arange(T).unsqueeze(0).expand(B, T))
    assert t.contracts == _HELD
