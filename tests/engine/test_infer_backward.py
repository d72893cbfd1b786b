"""Names a later use decides (issue 21: infer over the whole trace, backward too).

A tensor that enters with sizes fitting more than one seed ([4, 4] at B = T = 4) is decided by how
torch lines it up in a broadcast; a guess that fits one seed only is evidence, and a broadcast that
contradicts it stays a finding."""

from __future__ import annotations

import torch

import shapetrace
from shapetrace import NOT_ASKED


def _scores(B, H, T):
    return torch.randn(B, H, T, T)                                   # (B, H, T, T)


def test_a_causal_mask_at_b_equal_t_is_named_by_the_scores_it_masks():
    """ALiBi/Bloom style (bigscience-workshop/Megatron-DeepSpeed; transformers' modeling_bloom): a
    fresh ``ones(T, T).triu(1)`` mask at B = T = 4 fits [B, T] and [T, B]; masked_fill lines it up
    with the scores' [T, T]."""
    B, H, T, D = 4, 2, 4, 8
    x = torch.randn(B, T, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        q = x.view(B, T, H, D // H).transpose(1, 2)                  # (B, H, T, d_k)
        scores = q @ q.transpose(-2, -1)                             # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)          # (T, T)
        scores.masked_fill(future[None, None], float("-inf"))        # (B, H, T, T)
    triu = next(e for e in t.events if e.op == "triu")
    fill = next(e for e in t.events if e.op == "masked_fill")
    assert triu.output.dims == ("T", "T")
    assert fill.inputs[1].dims == (None, None, "T", "T")
    assert not [d for d in t.diagnostics if d.severity == "error"]


def test_a_guess_that_fits_one_seed_is_not_overruled_by_a_broadcast():
    """A [B, T, T] mask handed in and added to [B, H, T, T] scores at B = H (the mask without its
    head axis asked about in hyunwoongko/transformer#32): the sizes fit [B, T, T] only, so the
    broadcast that lines B up with H is reported, not renamed away."""
    B, H, T, D = 2, 2, 5, 8
    x, mask = torch.randn(B, T, D), torch.zeros(B, T, T)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        q = x.view(B, T, H, D // H).transpose(1, 2)                  # (B, H, T, d_k)
        scores = q @ q.transpose(-2, -1)                             # (B, H, T, T)
        scores + mask                                                # (B, H, T, T): mask's B meets H
    add = next(e for e in t.events if e.op == "add")
    assert add.inputs[1].dims == ("B", "T", "T")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["broadcast-mismatch"]


# -- a declaration speaks for the tensor it was made from ---------------------------------------------

def test_a_mask_declared_after_triu_names_the_triu_row():
    """``mask = torch.ones(T, T).triu(1)`` then ``shapetrace.name(mask, "T T")`` (shapetrace's own
    reference, and any user who names a mask): the triu row takes the declared names."""
    with shapetrace.trace(dims="B=1 T=6 D=32 H=4") as t:
        mask = torch.ones(6, 6, dtype=torch.bool).triu(1)                 # (T, T)
        shapetrace.name(mask, "T T")
    assert [(e.op, e.output.dims) for e in t.events] == [("triu", ("T", "T"))]


def test_a_declaration_decides_a_size_guess_at_B_equal_T():
    """At B = T the fresh [4, 4] fits [B, T] and [T, T]; the later declaration decides it."""
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        mask = torch.ones(4, 4, dtype=torch.bool).triu(1)                 # (T, T)
        shapetrace.name(mask, "T T")
    assert [(e.op, e.output.dims) for e in t.events] == [("triu", ("T", "T"))]


def test_a_declaration_never_overrides_names_already_proven():
    """x [B, T, D] transposed to [T, B, D], then declared "B T D" (a wrong declaration): the transpose
    row keeps what it proved; the contradiction is not resolved silently in favour of the declaration."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        y = x.transpose(0, 1)                                             # (T, B, D)
        shapetrace.name(y, "B T D")
    assert t.events[0].output.dims == ("T", "B", "D")


# -- heads proven by the attention product ----------------------------------------------------------------

def test_an_unnamed_batch_before_the_queries_is_not_called_heads_without_a_named_batch():
    """``[?, T, T]`` scores (one head, over an undeclared batch of 2 == H) and ``[?, ?, T, T]`` (nothing
    in front is a named batch): the size of H alone is not evidence of heads."""
    with shapetrace.trace(dims="T=5 D=8 H=2") as t:
        x = shapetrace.name(torch.randn(2, 5, 8), "_ T D")
        x @ x.transpose(-2, -1)                                      # (?, T, T)
        y = shapetrace.name(torch.randn(2, 2, 5, 8), "_ _ T D")
        y @ y.transpose(-2, -1)                                      # (?, ?, T, T)
    assert [e.output.dims for e in t.events if e.op == "matmul"] == [(None, "T", "T"), (None, None, "T", "T")]


def test_heads_of_a_product_are_carried_back_to_the_view_that_split_them():
    """DeepSeek-V2's MLA shape of things: q projected to H * 6 (not D), split by view(B, T, H, 6); the
    q·k product's axis before the queries is the heads, and so is the view's third axis. (With d_k given as
    D / H = 8: derived, the split proves the heads' width 6 first, shapetrace.engine.head_width, and names
    it d_k; tests/engine/test_head_width.py.)"""
    B, T, D, H = 2, 5, 24, 3
    proj = torch.nn.Linear(D, H * 6, bias=False)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H} d_k=8") as t:
        q = proj(torch.randn(B, T, D)).view(B, T, H, 6).transpose(1, 2)   # (B, H, T, 6)
        q @ q.transpose(-2, -1)                                            # (B, H, T, T)
    assert [e.output.dims for e in t.events[1:]] == [
        ("B", "T", "H", None), ("B", "H", "T", None), ("B", "H", None, "T"), ("B", "H", "T", "T")]


def test_a_slice_of_an_unnamed_fused_axis_carries_no_name_back():
    """Falcon-7B's multi-query attention (transformers' modeling_falcon, ``_split_heads`` for
    ``multi_query``): one fused ``query_key_value`` of width (H + 2)·d_k viewed as [B, T, H + 2, d_k], the
    queries sliced ``[..., :-2, :]``. The backward pass met the slice's placeholder ``#0.2[0:8]`` (a part of
    the unnamed axis, not the axis) and stopped the whole trace with an internal error; a part carries no
    name back, so the run is traced, with no fault and no error."""
    B, T, H, d_k = 3, 5, 8, 8
    x = torch.randn(B, T, H * d_k)
    w = torch.randn((H + 2) * d_k, H * d_k)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d_k} H={H}") as t:
        fused = torch.nn.functional.linear(x, w).view(B, T, H + 2, d_k)      # (B, T, H+2, d_k)
        q, k = fused[..., :-2, :], fused[..., [-2], :]                       # (B, T, H, d_k), (B, T, 1, d_k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)                          # (B, H, T, d_k), (B, 1, T, d_k)
        (q @ k.expand(-1, H, -1, -1).transpose(-2, -1)).softmax(-1)          # (B, H, T, T)
    assert t.exception is None
    assert [e.op for e in t.events] == ["linear", "view", "__getitem__", "__getitem__", "transpose", "transpose",
                                        "expand", "transpose", "matmul", "softmax"]
    assert t.events[1].output.dims == ("B", "T", None, None)
    assert t.events[-1].output.dims == ("B", "H", "T", "T")
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []


# -- a join names the heads of what it joins to the scores (round 11, tests/corpus/public11/gpt_oss_sinks.py) -------
# gpt-oss's per-head sink logit, a parameter (H,) reshaped (1, -1, 1, 1) and expanded to (B, H, T, 1), joined to the
# scores as one more key: its heads had no name and the correct file was "? checked 28 of 30 ops; not checked
# (unnamed axes): #20 reshape, #21 expand" on 14a2e35 (branch r11's first commit).

def test_a_sink_joined_to_the_scores_is_laid_along_the_heads():
    from tests.corpus.helpers import findings, traced_build, verdict_line
    from tests.corpus.public11 import gpt_oss_sinks

    t = traced_build(gpt_oss_sinks, "", "B=2 T=6 D=64 H=4 H_kv=2")
    by_op = [(e.op, e.outputs[0].dims) for e in t.events[20:23]]
    assert by_op == [("reshape", (None, "H", None, None)), ("expand", ("B", "H", "T", None)),
                     ("cat", ("B", "H", "T", "T+1"))]
    assert findings(t) == ()
    # (29: the sinks' reshape is on the parameter alone; its expand over the batch still counts)
    assert verdict_line(t) == "✓ checked all 29 ops that could carry a layout bug: every axis keeps its meaning " \
                              "from input to output; not measured: " + NOT_ASKED


def test_a_join_names_no_heads_where_another_axis_has_as_many_entries():
    from tests.corpus.helpers import traced_build
    from tests.corpus.public11 import gpt_oss_sinks

    t = traced_build(gpt_oss_sinks, "", "B=4 T=4 D=64 H=4 H_kv=2")   # (T = H: the join cannot say which)
    assert [e.outputs[0].dims[1] for e in t.events if e.op in ("reshape", "expand")][-3:-1] == [None, None]


def test_a_class_token_expanded_and_joined_is_named_by_the_join():
    """torchvision's ``VisionTransformer`` (tests/corpus/public12/torchvision_vit.py): the class token, a
    ``(1, 1, D)`` parameter, ``expand(n, -1, -1)`` and joined before the patches by ``cat(dim=1)``. The join
    lines every other axis up position by position, so the expand's ``64`` is the patches' ``D``. On 1123aec
    (main before round 12) the expand stayed ``[B, 1, 64]`` and the verdict "? checked 34 of 35 ops ...
    not checked (unnamed axes): #3 expand"; EVA's (public12/eva_rope.py) was "? checked 27 of 28"."""
    from tests.corpus.helpers import traced_build, verdict_line
    from tests.corpus.public12 import eva_rope, torchvision_vit

    t = traced_build(torchvision_vit, "", "B=2 T=9 D=64 H=4")
    expand = next(e for e in t.events if e.op == "expand")
    assert expand.outputs[0].dims == ("B", None, "D")
    # 34: torchvision's class token starts as zeros, and an expand of one value is not counted (any
    # arrangement of it is itself: tests/engine/test_verdict.py)
    assert verdict_line(t).startswith("✓ checked all 34 ops that could carry a layout bug")
    eva = traced_build(eva_rope, "", "B=2 T=9 D=64 H=4")
    assert next(e for e in eva.events if e.op == "expand").outputs[0].dims == ("B", None, "D")
    # (✓ checked all 28 until stop 52: EVA's 2-D rotary turns each patch by a row and a column, which grid
    # position each patch takes is not read, and its table's 6 ops are no longer counted checked)
    assert verdict_line(eva).startswith("? checked 22 of 28 ops that could carry a layout bug; not checked (unnamed "
                                        "axes): #9 tensor_split, #12 stack, #13 reshape, #17 tensor_split and 2 more; "
                                        "not proven: a rotary turns each token by several positions")


def test_a_join_does_not_name_a_part_whose_axis_it_joins_along():
    """The joined axis itself (``1`` and ``N`` into ``1+N``) is no one axis of the parts: nothing is carried
    back along it, and an unnamed part of another size there keeps no name."""
    B, T, D = 2, 6, 8
    x, extra = torch.randn(B, T, D), torch.randn(1, 3, D)
    with shapetrace.trace(dims=f"B={B} T={T} D={D} H=2") as t:
        torch.cat([extra.expand(B, -1, -1), x], dim=1)
    expand = next(e for e in t.events if e.op == "expand")
    assert expand.outputs[0].dims == ("B", None, "D")


class _NamedQueriesLatentKeys(torch.nn.Module):
    """Queries split from a projection to D (named H, d_k on the way), keys and values cut from one projection
    to a width no name has (DeepSeek's ``kv_b_proj``: H heads of ``d_k + v``), the keys written into a fresh
    buffer (``new_empty``) through a slice."""

    def __init__(self, D: int, H: int, v: int = 6):
        super().__init__()
        self.H, self.d, self.v = H, D // H, v
        self.q_proj = torch.nn.Linear(D, D)
        self.kv_proj = torch.nn.Linear(D, H * (D // H + v))

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.d).transpose(1, 2)                 # (B, H, T, d_k)
        kv = self.kv_proj(x).view(B, T, self.H, self.d + self.v).transpose(1, 2)      # (B, H, T, d_k+v)
        k_pass, value = torch.split(kv, [self.d, self.v], dim=-1)                     # (B, H, T, d_k), (B, H, T, v)
        key = k_pass.new_empty(B, self.H, T, self.d)                                  # (B, H, T, d_k)
        key[..., :].copy_(k_pass)
        w = (q @ key.transpose(-1, -2)).softmax(dim=-1)                               # (B, H, T, T)
        return (w @ value).transpose(1, 2).reshape(B, T, -1)                          # (B, T, H*v)


def test_keys_cut_from_unnamed_features_take_the_heads_the_queries_name():
    """Where the scores' heads are named by the queries, the keys' unnamed axis of H entries is the heads when
    the walk back ends as it does where neither is named: at the view that cut unnamed features (here
    ``F``) and at the buffer the writes filled. On 8110233 it ended there only at an expand from one entry
    (one key head for all), so the keys, the buffer and their transpose had no heads (``[B, ?, T, ?]``)."""
    torch.manual_seed(0)
    model, x = _NamedQueriesLatentKeys(24, 3).eval(), torch.randn(2, 5, 24)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        model(x)
    assert [(e.op, e.outputs[0].dims) for e in t.events[3:10]] == [
        ("linear", ("B", "T", "F")), ("view", ("B", "T", "H", None)), ("transpose", ("B", "H", "T", None)),
        ("split", ("B", "H", "T", None)), ("__getitem__", ("B", "H", "T", None)), ("copy_", ("B", "H", "T", None)),
        ("transpose", ("B", "H", None, "T"))]
    # (a key's d_k+v cut stays unnamed and unchecked; ``key[..., :]``, read as it lies, is not counted)
    assert t.report().verdict.line.startswith("? checked 6 of 13 ops")
    assert [d for d in t.diagnostics if d.severity in ("error", "warning")] == []


def test_learned_tokens_joined_between_named_parts_are_counted():
    """DINOv2's registers, ``cat((x[:, :1], register_tokens.expand(B, -1, -1), x[:, 1:]), dim=1)``
    (tests/corpus/public13/dinov2_registers.py): a part made from parameters only is a fixed number of
    entries, so the join is ``5+T`` and the expanded registers ``4``. On fc24ddf both were unnamed, and the
    correct file ``? checked 5 of 24 ops`` (every op after the join unchecked)."""
    from tests.corpus.helpers import traced_build, verdict_line
    from tests.corpus.public13 import dinov2_registers

    t = traced_build(dinov2_registers, "", "B=2 T=6 D=64 H=4")
    assert [(e.op, tuple(e.outputs[0].dims)) for e in t.events[3:6]] == [
        ("expand", ("B", "4", "D")), ("__getitem__", ("B", "T", "D")), ("cat", ("B", "5+T", "D"))]
    assert verdict_line(t).startswith("✓ checked all 24 ops that could carry a layout bug")


def test_a_join_with_a_computed_unnamed_part_stays_unnamed():
    """Only parameters count: a part computed from the input that has no name leaves the join unnamed."""
    x, extra = torch.randn(2, 6, 8), torch.randn(2, 3, 8)                   # extra: an input, (B, ?, D)
    with shapetrace.trace(dims="B=2 T=6 D=8 H=2") as t:
        torch.cat((x, extra * 2), dim=1)
    assert t.events[-1].op == "cat" and t.events[-1].outputs[0].dims[1] is None


def test_a_complex_rotary_table_is_named_by_the_pairs_it_turns():
    """Meta's rotary form, ``view_as_complex(q.reshape(B, T, H, -1, 2)) * freqs_cis[:T].view(1, T, 1, d/2)``:
    broadcasting lines the table's frequencies up with the pairs, each of which one entry turns by construction.
    On fc24ddf the table's frequency axis had no name, and its slice and view were ``not checked (unnamed
    axes)`` (Llama 4, tests/corpus/public13/llama4_chunked.py; meta_llama in public6)."""
    B, T, H, d = 2, 6, 4, 8
    x = torch.randn(B, T, H * d)
    angles = torch.outer(torch.arange(16).float(), 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
    freqs_cis = torch.polar(torch.ones(16, d // 2), angles)                          # (16, d/2) complex
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(x, "B T D")
        q = x.view(B, T, H, d)
        q_ = torch.view_as_complex(q.reshape(B, T, H, -1, 2))                       # (B, T, H, d/2)
        table = freqs_cis[: x.shape[1]].view(1, T, 1, d // 2)                      # (1, T, 1, d/2)
        torch.view_as_real(q_ * table).flatten(3)                                  # (B, T, H, d)
    pairs = next(e for e in t.events if e.op == "view_as_complex").outputs[0].dims[-1]
    cut, view = (e for e in t.events if e.op in ("__getitem__", "view") and e.inputs[0].shape[-1] == d // 2)
    assert pairs is not None and tuple(cut.outputs[0].dims) == ("T", pairs)
    assert tuple(view.outputs[0].dims) == (None, "T", None, pairs)
    assert t.report().verdict.line.startswith("✓ checked all")


def test_a_real_table_is_not_named_by_a_product_of_reals():
    """Only two complex operands: a real table's layout is checked on its values (:mod:`.rotary`), not named."""
    x, table = torch.randn(2, 6, 4, 8), torch.randn(16, 8)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T H d_k")
        x * table[: x.shape[1]].view(1, x.shape[1], 1, 8)
    view = next(e for e in t.events if e.op == "view")
    assert tuple(view.outputs[0].dims) == (None, "T", None, None)


def _pairs_turned(swap_picks: bool = False):
    """torchtune's ``RotaryPositionalEmbeddings.forward`` on ``[b, s, n_h, h_d]``: the pairs ``(..., d/2, 2)``
    turned entry by entry and stacked back, ``stack([x0 * c - x1 * s, x1 * c + x0 * s], -1).flatten(3)``."""
    B, T, H, d = 2, 6, 4, 8
    x = torch.randn(B, T, H * d)
    cache = torch.randn(16, d // 2, 2)                                                # (S, d/2, [cos, sin])
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(x, "B T D")
        xs = x.view(B, T, H, d).reshape(B, T, H, -1, 2)                               # (B, T, H, d/2, 2)
        rope = cache[: x.shape[1]].view(1, T, 1, d // 2, 2)
        first, second = (xs[..., 1], xs[..., 0]) if swap_picks else (xs[..., 0], xs[..., 1])
        torch.stack([first * rope[..., 0] - second * rope[..., 1],
                     second * rope[..., 0] + first * rope[..., 1]], -1).flatten(3)   # (B, T, H, d)
    return t


def test_pairs_turned_within_each_pair_and_stacked_keep_the_pair_axis():
    """On fc24ddf the stack's new axis had no name, and so neither had the ``flatten(3)`` after it: torchtune
    (tests/corpus/public13/torchtune_mha.py, 27 -> 36 of 50 ops checked) and ChatGLM2 (public7, 29 -> 40 of 53)
    stayed ``?`` for want of it; the cos/sin cache's own axes stay unnamed (nothing proves them)."""
    t = _pairs_turned()
    reshape, stack, flatten = (next(e for e in t.events if e.op == op) for op in ("reshape", "stack", "flatten"))
    assert tuple(stack.outputs[0].dims) == tuple(reshape.outputs[0].dims)
    assert tuple(flatten.outputs[0].dims) == ("B", "T", "H", "d_k")
    assert _pairs_turned(swap_picks=True).events[-1].outputs[0].dims[-1] == "d_k"   # (the order of entries is values)


def _resampled(transposed):
    """Idefics2's perceiver resampler (tests/corpus/public17/idefics2_resampler.py): learnt latents ``[3, D]``
    joined behind the context ``[B, T, D]`` for the keys and values, queries from the latents alone; the
    output ``[B, H, 3, d_k]`` merged back with or without the transpose."""
    torch.manual_seed(0)
    B, T, D, H = 2, 6, 32, 4
    latents, context = torch.nn.Parameter(torch.randn(3, D)), torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={D} H={H}") as t:
        lat = latents.unsqueeze(0).expand(B, -1, -1)                  # (B, 3, D)
        kv = torch.cat([context, lat], dim=-2)                        # (B, T+3, D)
        q = lat.view(B, 3, H, D // H).transpose(1, 2)                 # (B, H, 3, d_k)
        k = kv.view(B, T + 3, H, D // H).transpose(1, 2)              # (B, H, T+3, d_k)
        out = (q @ k.transpose(2, 3)).softmax(-1) @ k                 # (B, H, 3, d_k)
        (out.transpose(1, 2) if transposed else out).reshape(B, 3, D)
    return t


def test_latents_joined_to_the_tokens_are_tokens_so_a_merge_without_transpose_mixes_them():
    """On af0e286 (main) the merge without transpose was ``?``: the latents' count ``3`` had no role, so
    ``!H*3`` mixed nothing known; now the count joined along the tokens (``T+3``) is tokens, and it is
    ``mixed-axis``."""
    t = _resampled(transposed=False)
    assert [(d.kind, t.events[d.event].op) for d in t.diagnostics if d.severity == "error"] == \
        [("mixed-axis", "reshape")]
    assert t.events[-1].outputs[0].dims == ("B", "!H*3", "!H*3*d_k")


def test_latents_merged_back_after_the_transpose_keep_their_count():
    t = _resampled(transposed=True)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert t.events[-1].outputs[0].dims == ("B", "3", "D")


class _ComplexRotary(torch.nn.Module):
    """Meta's and SAM 2's complex rotary, its table a plain tensor attribute (``self.freqs_cis``, as SAM 2's
    ``RoPEAttention`` keeps it): ``view_as_complex(q.reshape(..., -1, 2)) * freqs_cis.view(1, 1, T, d/2)``; the
    keys, ``r`` frames of memory, take the table ``repeat``-ed ``r`` times (``interleave``: the slip of
    ``repeat_interleave``, each position given to ``r`` consecutive memory tokens)."""

    def __init__(self, D, H, T, interleave=False):
        super().__init__()
        self.H, self.interleave = H, interleave
        self.q_proj, self.k_proj = torch.nn.Linear(D, D), torch.nn.Linear(D, D)
        freqs = torch.outer(torch.arange(T).float(), torch.rand(D // H // 2))
        self.freqs_cis = torch.polar(torch.ones_like(freqs), freqs)              # (T, d/2) complex

    def forward(self, x, memory):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.H, -1).transpose(1, 2)                # (B, H, T, d)
        k = self.k_proj(memory).view(B, memory.shape[1], self.H, -1).transpose(1, 2)   # (B, H, S, d)
        q_ = torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2))              # (B, H, T, d/2)
        k_ = torch.view_as_complex(k.reshape(*k.shape[:-1], -1, 2))              # (B, H, S, d/2)
        table = self.freqs_cis.view(1, 1, *self.freqs_cis.shape)                 # (1, 1, T, d/2)
        r = k_.shape[-2] // q_.shape[-2]
        keys_table = table.repeat_interleave(r, dim=-2) if self.interleave else table.repeat(1, 1, r, 1)
        q = torch.view_as_real(q_ * table).flatten(3)                            # (B, H, T, d)
        k = torch.view_as_real(k_ * keys_table).flatten(3)                       # (B, H, S, d)
        return torch.nn.functional.scaled_dot_product_attention(q, k, k)


def _complex_rotary(dims, interleave=False):
    sizes = dict((k, int(v)) for k, v in (kv.split("=") for kv in dims.split()))
    torch.manual_seed(0)
    model = _ComplexRotary(sizes["D"], sizes["H"], sizes["T"], interleave).eval()
    x, memory = torch.randn(sizes["B"], sizes["T"], sizes["D"]), torch.randn(sizes["B"], 2 * sizes["T"], sizes["D"])
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x, memory)
    return t


def test_a_complex_table_is_named_on_every_axis_its_product_lines_up():
    """Each axis of the table that meets a named axis of the queries' pairs is named (positions T, pairs
    d/2): on eea3781 only the last of complex_tables' walkers kept its pin (each walker's pin held the
    others' axes as they were, unnamed, and the merge took them), so the table showed ``(None, D/2%4)``."""
    t = _complex_rotary("B=2 T=6 S=12 D=32 H=4")
    view = next(e for e in t.events if e.op == "view" and e.inputs[0].shape == (6, 4))
    assert view.inputs[0].dims == ("T", "D/2%4")
    assert view.outputs[0].dims == (None, None, "T", "D/2%4")


def test_a_complex_table_guessed_from_equal_sizes_yields_to_its_product():
    """At B = T = 4 with d/2 = 4 the table [4, 4] held by the model fits [B, T] and [T, B]: its guess yields
    to the product that lines it up with the queries' pairs (T, pairs), and no pin carries the guess on (the
    heads found on the keys' product kept ``2*B`` beside them). On eea3781: ✗ broadcast-mismatch (T of the
    guess against the pairs) and attends-over-batch (the keys' axis ``2*B``), on correct code."""
    t = _complex_rotary("B=4 T=4 D=32 H=4")
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.mark == "?"


def test_a_repeated_table_lined_up_with_keys_of_another_name_is_not_checked():
    """The keys' table is the queries' ``T`` repeated (``2*T``, or ``T`` interleaved) where its product lines it
    up with the memory's keys ``S``: that the two are the same positions rests on their sizes alone, so the
    repeat keeps neither name, stays unchecked, and the interleaved slip gets no ✓ (on eea3781 the repeat's
    output was pinned ``S`` and, once the table was named, both files would read ✓)."""
    for interleave, op in ((False, "repeat"), (True, "repeat_interleave")):
        t = _complex_rotary("B=2 T=6 S=12 D=32 H=4", interleave)
        repeat = next(e for e in t.events if e.op == op)
        assert repeat.outputs[0].dims == (None, None, None, "D/2%4")
        assert t.report().verdict.line.startswith(f"? checked 16 of 17 ops that could carry a layout bug; "
                                                  f"not checked (unnamed axes): #{repeat.index} {op}; ")


def test_heads_found_on_a_sum_of_biases_reach_every_operand_of_the_sum():
    """LayoutLMv3's ``rel_pos_x + rel_pos_y`` added to the scores: the heads the scores line up with the sum
    are each bias's heads (each a ``Linear(buckets, H)``'s width, which no name proves by itself). The walk
    back went into the first operand only: with ``F.one_hot`` named (tests/engine/test_propagate.py; on
    eea3781 nothing here was named) and without that, the second Linear and its permute stayed unchecked
    (? checked 11 of 13)."""
    from tests.engine.test_propagate import _bucketed_biases

    t = _bucketed_biases(two=True)
    assert [e.outputs[0].dims for e in t.events if e.op == "linear"] == [("B", "T", "T", "H")] * 2
    assert t.report().verdict.line.startswith("✓ checked all 13 ops")
