"""What each diagnostic says (message, fix, severity), and silence on correct code, whatever the sizes.

Whether each class of bug is caught at many sizes is tests/engine/test_bug_classes.py; the models are
tests/corpus/bug_models.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import shapetrace
from shapetrace.app.session import trace_reference
from shapetrace.attention.config import AttentionConfig
from tests.corpus.bug_models import correct, found, interleaved_heads, no_key_transpose, skip_transpose, trace


def run(fn, B=2, T=6, H=8, D=512):
    """``fn`` (a model of tests/corpus/bug_models.py) on x [B, T, D] named "B T D"; its (severity, kind)s."""
    t, _ = trace(fn, B, T, D, H, names="B T D")
    return found(t), t


def test_no_key_transpose_runs_silently_but_is_flagged():
    kinds, t = run(no_key_transpose, T=64, H=8)
    assert ("error", "contracts-different-axes") in kinds
    d = next(d for d in t.diagnostics if d.kind == "contracts-different-axes")
    assert "sums over d_k of the first with T of the second" in d.message and "transpose" not in d.message
    assert d.fix == "If this is q @ k, transpose k first: q @ k.transpose(-2, -1)."


def test_interleaved_heads_is_a_note_not_an_error():
    kinds, t = run(interleaved_heads)
    assert kinds == {("note", "nonstandard-head-split")}
    assert t.events[0].output.dims == ("B", "T", "D/8", "D%8")   # which 8th of D, where in it


def test_mixed_axis_message_names_axes_and_fix_says_how():
    _, t = run(skip_transpose)
    d = next(d for d in t.diagnostics if d.kind == "mixed-axis")
    assert d.event == 0 and d.severity == "error"
    assert "T and H" in d.message and "view(B, T, H, d_k)" in d.fix and "transpose(1, 2)" in d.fix
    assert "transpose" not in d.message
    assert t.events[0].output.dims[1] == "!T*H"


def test_ambiguous_sizes_note_when_names_come_from_sizes():
    """At B = T = 8 the input ``[8, 8, 64]`` fits ``[B, T, D]`` and ``[T, B, D]``: its names are a choice."""
    x = torch.randn(8, 8, 64)
    with shapetrace.trace(dims="B=8 T=8 D=64 H=8") as t:
        x.view(8, 8, 8, 8).transpose(1, 2)
    assert t.events[0].output.dims == ("B", "T", "H", "d_k")
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("note", "ambiguous-sizes")]
    assert t.diagnostics[0].message == "B = T = 8: names found from sizes alone are ambiguous."


def test_equal_sizes_no_seed_chose_between_say_nothing():
    """At T = H = d_k = 8 the input ``[2, 8, 64]`` fits one reading, ``[B, T, D]``, and every later name
    flows from it as at distinct sizes: no name rests on the equal sizes, so no note (it was one)."""
    x = torch.randn(2, 8, 64)
    with shapetrace.trace(dims="B=2 T=8 D=64 H=8") as t:
        x.view(2, 8, 8, 8).transpose(1, 2)
    assert t.events[0].output.dims == ("B", "T", "H", "d_k")
    assert t.diagnostics == []


@settings(max_examples=25, deadline=None)
@given(B=st.integers(1, 3), T=st.integers(1, 12), H=st.sampled_from([1, 2, 3, 4, 8]),
       dk=st.sampled_from([1, 2, 4, 8, 16]))
def test_correct_attention_is_never_flagged(B, T, H, dk):
    kinds, t = run(correct, B=B, T=T, H=H, D=H * dk)
    assert kinds == set()
    assert t.events[-1].output.dims == (("B", "T", "D") if B > 1 else (None, "T", "D")) or \
        t.events[-1].output.dims[-1] == "D"


@settings(max_examples=15, deadline=None)
@given(T=st.integers(2, 9), H=st.sampled_from([2, 4, 8]), dk=st.sampled_from([2, 8, 16]))
def test_reference_model_has_no_error_or_warning(T, H, dk):
    trace = trace_reference(AttentionConfig(d_model=H * dk, heads=H, seq_len=T))
    assert [d for d in trace.diagnostics if d.severity in ("error", "warning")] == []


def test_flattening_tokens_with_features_is_only_a_warning():
    x = torch.randn(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        shapetrace.name(x, "B T D")
        x.view(2, 6, 8, 64).transpose(1, 2).contiguous().view(2, 8, 6 * 64)  # (B, H, T*d_k)
    assert t.events[-1].output.dims == ("B", "H", "T*d_k")
    assert [(d.severity, d.kind) for d in t.diagnostics] == [("warning", "tokens-merged-with-features")]


def test_slices_and_joins_never_keep_a_name_of_another_size():
    """A part of T is ``T[0:3]``, a join is ``T+T``: never the bare name at the wrong size."""
    x = torch.randn(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        shapetrace.name(x, "B T D")
        x[:, :3]                                                  # (B, T[0:3], D)
        x.narrow(2, 0, 100)                                       # (B, T, D[0:100])
        torch.cat([x, x], dim=1)                                  # (B, T+T, D)
        x[:, :1]                                                  # (B, T[0:1], D)
        x[:, 2:5]                                                 # (B, T[2:5], D)
        x.permute(2, 1, 0)                                        # (D, T, B)
    assert [e.output.dims for e in t.events] == [
        ("B", "T[0:3]", "D"), ("B", "T", "D[0:100]"), ("B", "T+T", "D"), ("B", "T[0:1]", "D"),
        ("B", "T[2:5]", "D"), ("D", "T", "B")]
    with shapetrace.trace(dims="B=2 T=6 D=512") as t2:            # x.T reverses every axis (deprecated above 2-d)
        shapetrace.name(x, "B T D")
        _ = x.T                                                   # (D, T, B)  # noqa: B018
    assert t2.events[0].output.dims == ("D", "T", "B") and t2.events[0].output.shape == (512, 6, 2)
    assert [e.output.shape for e in t.events] == [(2, 3, 512), (2, 6, 100), (2, 12, 512), (2, 1, 512),
                                                  (2, 3, 512), (512, 6, 2)]


def test_folding_batch_and_heads_for_bmm_is_clean():
    """[B, H, T, d_k] -> [B*H, T, d_k] is the standard bmm layout, not a bug."""
    x = torch.randn(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        shapetrace.name(x, "B T D")
        q = x.view(2, 6, 8, 64).transpose(1, 2).reshape(16, 6, 64)   # (B*H, T, d_k)
        torch.bmm(q, q.transpose(1, 2))                               # (B*H, T, T)
    assert t.events[2].output.dims == ("B*H", "T", "d_k")
    assert t.diagnostics == []


def test_a_size_three_axis_is_not_named_qkv_by_size():
    x = torch.randn(2, 6, 512)
    with shapetrace.trace(dims="B=2 T=6 D=512") as t:
        shapetrace.name(x, "B T D")
        x[:, None].expand(2, 3, 6, 512)                               # (B, 3, T, D)
    assert t.events[-1].output.dims == ("B", None, "T", "D")


def test_pairs_inside_one_head_are_not_a_head_split():
    """meta-llama/llama ``apply_rotary_emb``: ``xq.float().reshape(*xq.shape[:-1], -1, 2)`` on a declared
    [B, T, H, d_k] cuts each head's features into pairs; every pair stays inside its head, so no
    ``nonstandard-head-split`` note (a split of D itself still gets one)."""
    xq = torch.randn(1, 4, 2, 8)
    with shapetrace.trace(dims="B=1 T=4 H=2 d_k=8") as t:
        shapetrace.name(xq, "B T H d_k")
        torch.view_as_complex(xq.reshape(1, 4, 2, 4, 2))              # (B, T, H, d_k/2) complex
    assert [e.output.dims for e in t.events] == [("B", "T", "H", "d_k/2", "d_k%2"), ("B", "T", "H", "d_k/2")]
    assert t.diagnostics == []
    x = torch.randn(1, 4, 8)
    with shapetrace.trace(dims="B=1 T=4 D=8 H=2") as t:
        shapetrace.name(x, "B T D")
        x.view(1, 4, 4, 2)                                            # (B, T, D/2, D/4): not H heads of d_k
    assert [d.kind for d in t.diagnostics] == ["nonstandard-head-split"]


def test_a_reshape_of_pixels_is_not_called_a_head_split():
    """The patchify mistake (timm's PatchEmbed done by reshape alone): [B, C, H_img, W_img] reshaped to
    [B, N, C·p·p] mixes channels with pixel rows, but nothing here is a head or a feature of D, so no
    note about heads is printed (a false statement); the axes are shown as mixed."""
    x = torch.randn(2, 3, 8, 8)
    with shapetrace.trace(dims=dict(B=2, C=3, N=16, H_img=8, W_img=8)) as t:
        shapetrace.name(x, "B C H_img W_img")
        x.reshape(2, 16, 12)                                          # (B, N?, C*p*p?)
    assert t.events[0].output.dims == ("B", "!C*H_img*W_img", "!H_img*W_img")
    assert [d.kind for d in t.diagnostics] == []


# ---------------------------------------------------------------------------
# --dims that disagree with the code: a question about the sizes, once, under the verdict
# ---------------------------------------------------------------------------

def _annotated_four_heads(dims: str, T: int = 8):
    """tests/scripts/annotated_four_heads.py (the Annotated Transformer, h=4 over d_model=64) traced with
    the sizes a user gave: its q, k and v are split on one line, by three views."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("annotated_four_heads",
                                                  Path(__file__).parents[1] / "scripts" / "annotated_four_heads.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(2, T, 64)                                                 # (B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        module.MultiHeadedAttention()(x, x, x)
    return t


@pytest.mark.parametrize("T", [6, 8], ids=["distinct", "T=H"])
def test_dims_with_the_wrong_heads_are_said_to_disagree_once(T):
    """Issue 35: --dims H=8 for a 4-head script gave a confident nonstandard-head-split three times."""
    t = _annotated_four_heads(f"B=2 T={T} D=64 H=8", T)
    (d,) = [d for d in t.diagnostics if d.kind in ("dims-disagree", "nonstandard-head-split")]
    view = next(e.index for e in t.events if e.op == "view")
    assert (d.kind, d.severity, d.event) == ("dims-disagree", "note", view)
    assert d.message == (f"--dims H=8, but view #{view} splits D=64 into 4 × 16: did you mean H=4? Names that come "
                         "from H are not proven while the sizes disagree.")
    assert d.fix == "Give the sizes the code uses: --dims H=4 (d_k = 16 follows)."
    v = t.report().verdict
    assert v.mark == "?" and "not proven: the sizes given disagree with the code" in v.line
    assert [x for x in t.diagnostics if x.severity != "note"] == []


@pytest.mark.parametrize("T", [6, 4], ids=["distinct", "T=H"])
def test_dims_that_fit_the_code_say_nothing_of_the_sizes(T):
    t = _annotated_four_heads(f"B=2 T={T} D=64 H=4", T)
    assert [d.kind for d in t.diagnostics] == []   # (T = H = 4: the input [B, T, D] fits one reading)
    assert t.report().verdict.mark == "✓"


def test_a_view_d_k_by_h_is_still_the_nonstandard_split_not_a_disagreement():
    """The interleaved split view(B, T, d_k, H) of the sizes given is consistent code: the note stays."""
    x = torch.randn(2, 6, 64)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        shapetrace.name(x, "B T D")
        x.view(2, 6, 16, 4)                                                   # (B, T, d_k, H)
    assert [d.kind for d in t.diagnostics] == ["nonstandard-head-split"]


def _chunked_state(x, H, shift):
    """fla's naive chunked linear attention (tests/corpus/reports5/fla_linear_attn_cumsum.py): each chunk's
    state ``kᵀ v`` sums over the chunk's tokens (T%2), and chunk i meets the states of the chunks before it
    (``cat([zeros, kv[:, :, :-1]], 2)``)."""
    B, T, D = x.shape
    k = x.view(B, T, H, D // H).transpose(1, 2).reshape(B, H, T // 2, 2, D // H)    # (B, H, T/2, T%2, d_k)
    kv = (k.transpose(-1, -2) @ k).cumsum(2)                                       # (B, H, T/2, d_k, d_k)
    if shift:
        kv = torch.cat([torch.zeros_like(kv[:, :, :1]), kv[:, :, :-1]], dim=2)      # the chunks before each
    return k @ kv                                                                   # (B, H, T/2, T%2, d_k)


@pytest.mark.parametrize("shift", [False, True])
def test_a_chunks_state_summed_over_its_tokens_and_shifted_by_one_chunk_is_no_error(shift):
    """The state ``kᵀ v`` batches over the chunks (T/2) and sums over each chunk's tokens (T%2): it mixes
    tokens, so it is no attends-over-wrong-axis; the states shifted by one chunk (``1+T/2[0:2]``) line up with
    the chunks on purpose, so no batch-mismatch. Both were errors on e15aeb2 (the correct fla file was ✗)."""
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        _chunked_state(x, 4, shift)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.events[-1].outputs[0].dims == ("B", "H", "T/2", "T%2", "d_k")


def _aligned(x, y, dim_b):
    """ESIM's soft alignment (tests/corpus/reports5/esim_pool_features.py): ``softmax(e, 2) @ b`` and
    ``softmax(e, dim_b)ᵀ @ a``."""
    e = torch.matmul(x, y.transpose(1, 2))                                          # (B, T, T)
    a_tilde = torch.matmul(torch.softmax(e, dim=2), y)                              # (B, T, D)
    b_tilde = torch.matmul(torch.softmax(e, dim=dim_b).transpose(1, 2), x)          # (B, T, D)
    return a_tilde, b_tilde


# (dim_b=2 was softmax-wrong-axis at the softmax until the merge with r16: the same slip is now said once, on the
# product, as values-by-queries: weights over the keys summed over their queries)
@pytest.mark.parametrize(("dim_b", "errors"), [(1, []), (2, ["values-by-queries"])])
def test_a_softmax_over_the_queries_summed_over_them_is_the_other_alignment(dim_b, errors):
    """``softmax(e, dim=1)ᵀ @ a`` normalises over the premise's words and sums over them: the hypothesis
    attending to the premise, no softmax over the wrong axis (an error on 6c3b581: ESIM's correct file was ✗).
    ``softmax(e, dim=2)ᵀ @ a`` sums over the premise's words weights normalised over the hypothesis's."""
    x, y = torch.randn(2, 6, 32), torch.randn(2, 6, 32)
    encode = torch.nn.Linear(32, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(y, "B T D")
        _aligned(encode(x), encode(y), dim_b)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == errors


def _global_query_over_windows(x, q, windows_outer):
    """GCViT's window attention with one query per image (tests/corpus/public33/gcvit_global.py): the windows
    ``(B nW, N, D)`` batch-major, the image's query ``(B, 1, N, D)`` tiled over them."""
    B, Hp, Wp, D = x.shape
    w = x.view(B, Hp // 4, 4, Wp // 4, 4, D).permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, D)   # (B·nW, N, D)
    n = w.shape[0] // B
    q = q.repeat(n, 1, 1, 1) if windows_outer else q.repeat(1, n, 1, 1)                     # (B, nW, 16, D)
    return q.reshape(-1, 16, D) @ w.transpose(1, 2)


@pytest.mark.parametrize(("windows_outer", "errors"), [(False, []), (True, ["batch-mismatch"])])
def test_a_query_repeated_over_each_images_windows_pairs_its_copies_with_them(windows_outer, errors):
    """``repeat(1, nW, ...)`` gives ``B·copies``: the copies pair with the windows ``Hp/4·Wp/4`` (one value per
    copy), B with B, no error; ``repeat(nW, 1, ...)`` gives ``copies·B``, B lined up with the windows' B and
    part of their grid: unrelated images. On bca23cb both were batch-mismatch (the correct one a false ✗,
    once the query was named through GCViT's pooling: only an axis of copies alone paired with anything)."""
    x, q = torch.randn(2, 8, 8, 32), torch.randn(2, 1, 16, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 Hp=8 Wp=8 D=32") as t:
        shapetrace.name(x, "B Hp Wp D")
        shapetrace.name(q, "B _ _ D")
        _global_query_over_windows(x, q, windows_outer)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == errors
    assert t.events[-1].inputs[1].dims == ("B*Hp/4*Wp/4", "D", "Hp%4*Wp%4")


def test_a_product_per_query_over_every_sequences_heads_is_no_attention_over_a_wrong_axis():
    """NEZHA's value-side relative term (transformers v4.40, ``NezhaSelfAttention``): the probabilities ``permute(2,
    0, 1, 3).view(T, B·H, T)`` times a table ``[T, T, d_k]`` of one vector per distance: batched over the query
    positions, its rows ``B·H`` hold every sequence's heads and it sums over the keys. On 69fb7a4 (once the table
    was named) it was ``✗ attends-over-wrong-axis`` ("each token only sees its own heads"): a matrix axis that holds
    the batch is not a head's own tokens, as a key axis that holds it was not before."""
    probs, table = torch.softmax(torch.randn(2, 4, 6, 6), -1), torch.randn(6, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(probs, "B H T T")
        shapetrace.name(table, "T T d_k")
        torch.matmul(probs.permute(2, 0, 1, 3).contiguous().view(6, 8, 6), table)   # (T, B·H, d_k)
    assert [e.outputs[0].dims for e in t.events if e.op == "matmul"] == [("T", "B*H", "d_k")]
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []


@pytest.mark.parametrize("summed", ["keys", "heads"])
def test_a_product_per_query_that_sums_over_the_keys_mixes_the_tokens(summed):
    """TiSASRec's interval values (tests/corpus/public46/tisasrec_time_aware.py): each query's weights
    ``attn.unsqueeze(-2)`` ``[H·B, T, 1, T]`` times its own table of values ``[H·B, T, T, d_k]``, batched over the
    queries and summed over the keys: the keys are tokens, so every query does see every key. On c40c3fb it was
    ``✗ attends-over-wrong-axis`` ("each token only sees its own heads"): only the product's rows and columns were
    read, never the axis it sums over. Its twin sums over the heads ([B, T, 1, H] @ [B, T, H, d_k], the product of
    a split never transposed): that one still is the error."""
    w, table = torch.softmax(torch.randn(2, 4, 6, 6), -1), torch.randn(2, 4, 6, 6, 8)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        if summed == "keys":
            shapetrace.name(w, "B H T T")
            shapetrace.name(table, "B H T T d_k")
            w.unsqueeze(-2) @ table                                                       # (B, H, T, 1, d_k)
        else:
            shapetrace.name(w, "B T H H")
            shapetrace.name(table, "B T H H d_k")
            w.unsqueeze(-2) @ table                                                       # (B, T, H, 1, d_k)
    errors = [d.kind for d in t.diagnostics if d.severity in ("error", "warning")]
    assert errors == ([] if summed == "keys" else ["attends-over-wrong-axis"])
