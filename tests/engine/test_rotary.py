"""shapetrace.engine.rotary and rules/rotary.py: a rotary table pairs features as its rotation does.

The rotation's pairs are read from element provenance (the data moves replayed on coordinates), the
table's from its values at call time; what cannot be read is said, and the verdict then claims nothing.
"""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine.rotary import MISMATCH, PAIRED, UNCHECKED
from shapetrace.engine.verdict import verdict_line


def rotate_half(x):
    """transformers' Llama ``rotate_half``: feature i with i + d/2."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)                                     # (B, H, T, d_k)


def rotate_every_two(x):
    """transformers' GPT-J ``rotate_every_two``: feature 2k with 2k + 1."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)                       # (B, H, T, d_k)


def freqs(T: int, d: int, device="cpu", start: int = 0):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=device).float() / d))       # (d/2,)
    return torch.outer(torch.arange(start, start + T, device=device).float(), inv)  # (T, d/2)


def rope(q, emb, rotate):
    """``q * cos + rotate(q) * sin`` (transformers' ``apply_rotary_pos_emb``), the table (T, d) broadcast."""
    return q * emb.cos() + rotate(q) * emb.sin()                            # (B, H, T, d_k)


def traced(rotate, table, shape=(2, 3, 5, 8), device="cpu", start: int = 0, expand: bool = False):
    B, H, T, d = shape
    q = torch.randn(B, T, H * d, device=device)
    with torch.no_grad(), shapetrace.trace() as t:
        shapetrace.name(q, "B T D")
        x = q.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        f = freqs(T, d, device, start)                                      # (T, d/2)
        emb = torch.cat((f, f), -1) if table == "halves" else f.repeat_interleave(2, -1)  # (T, d)
        if expand:
            emb = emb.expand(B, H, T, d)                                    # (B, H, T, d): no broadcast
        rope(x, emb, rotate)
    return t


def outcomes(t):
    return [(r.outcome, r.partners) for r in t.analysis().rotaries]


HALVES = (4, 5, 6, 7, 0, 1, 2, 3)
PAIRS = (1, 0, 3, 2, 5, 4, 7, 6)


def test_the_partners_come_from_the_rotations_data_moves():
    assert outcomes(traced(rotate_half, "halves")) == [(PAIRED, HALVES)]
    assert outcomes(traced(rotate_every_two, "interleaved")) == [(PAIRED, PAIRS)]


def test_equal_sizes_decide_nothing():
    # B = T = H = 4 (and d_k = 8): the same partners, the same outcomes
    assert outcomes(traced(rotate_half, "halves", (4, 4, 4, 8))) == [(PAIRED, HALVES)]
    assert outcomes(traced(rotate_half, "interleaved", (4, 4, 4, 8))) == [(MISMATCH, HALVES)]
    assert outcomes(traced(rotate_every_two, "halves", (4, 4, 4, 8))) == [(MISMATCH, PAIRS)]


def test_an_interleaved_table_under_rotate_half_is_an_error_on_the_rotation():
    t = traced(rotate_half, "interleaved")
    (d,) = [d for d in t.diagnostics if d.kind == "rotary-pairing-mismatch"]
    cat = next(e for e in t.events if e.op == "cat" and e.index == d.event)
    assert d.severity == "error" and cat.inputs[0].shape == (2, 3, 5, 4)
    assert d.message == (
        f"cat #{cat.index} rotates features in pairs by halves (feature i with i + d/2, as rotate_half does), but "
        "the table [5, 8] it is multiplied by gives feature 0 and its partner 4 different values: its equal "
        "columns pair features interleaved (2k with 2k + 1, as freqs.repeat_interleave(2, -1) lays it out). Each "
        "pair is turned by two different angles, so the embedding is no rotation and q·k no longer depends on the "
        "relative position alone.")
    assert d.fix == ("Lay the table out as the rotation pairs features: torch.cat((freqs, freqs), dim=-1), not "
                     "freqs.repeat_interleave(2, dim=-1); or rotate the way the table is laid out.")
    assert verdict_line(t.report().verdict).startswith("✗ 1 error")


def test_a_halves_table_under_rotate_every_two_is_an_error_on_the_flatten():
    t = traced(rotate_every_two, "halves")
    (d,) = [d for d in t.diagnostics if d.kind == "rotary-pairing-mismatch"]
    assert t.events[d.event].op == "flatten"
    assert "rotates features in pairs interleaved (feature 2k with 2k + 1, as rotate_every_two does)" in d.message
    assert "gives feature 0 and its partner 1 different values: its equal columns pair features by halves" in d.message


def test_on_the_meta_device_the_pairing_is_not_checked_and_the_verdict_says_so():
    t = traced(rotate_half, "halves", device="meta")
    assert [(r.outcome, r.why) for r in t.analysis().rotaries] == [(UNCHECKED, "the meta device has no values")]
    (d,) = [d for d in t.diagnostics if d.kind == "rotary-pairing-unchecked"]
    assert d.severity == "note" and d.message.endswith("was not checked for how its table pairs features: the meta "
                                                       "device has no values.")
    line = verdict_line(t.report().verdict)
    assert line.startswith("?") and "not proven: a rotary table's values were not read" in line


def test_a_table_of_the_rotated_tensors_shape_is_read():
    # the table expanded to (B, H, T, d) before the product: no broadcast. Before, no values were kept and
    # the interleaved table under rotate_half went unread; a product of one shape now keeps both operands
    # (columns.kept_table: TIED), so the table is read and its pairing compared as a broadcast one's is
    t = traced(rotate_half, "interleaved", expand=True)
    assert [(r.outcome, r.partners) for r in t.analysis().rotaries] == [(MISMATCH, HALVES)]
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-pairing-mismatch"]
    assert outcomes(traced(rotate_half, "halves", expand=True)) == [(PAIRED, HALVES)]


def test_a_table_at_position_0_alone_says_nothing_of_its_pairs():
    # one token at position 0: cos = 1 and sin = 0 on every feature, whichever way the table is laid out
    for table in ("halves", "interleaved"):
        t = traced(rotate_half, table, (2, 3, 1, 8))
        assert [r.outcome for r in t.analysis().rotaries] == [UNCHECKED]
    # one token at position 5 (a decode step): read, and the layout shows
    assert outcomes(traced(rotate_half, "interleaved", (2, 3, 1, 8), start=5)) == [(MISMATCH, HALVES)]
    assert outcomes(traced(rotate_half, "halves", (2, 3, 1, 8), start=5)) == [(PAIRED, HALVES)]


def test_a_sum_of_two_products_that_is_no_rotation_is_no_rotary():
    # x * a + y * b with y not made from x by moving elements (a gated sum): nothing to check
    x, y = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    with shapetrace.trace() as t:
        x * torch.rand(5, 8) + y * torch.rand(5, 8)                         # (2, 5, 8)
        x * torch.rand(5, 8) + x.flip(0) * torch.rand(5, 8)                 # (2, 5, 8): moves across batch entries
    assert t.analysis().rotaries == ()


def test_a_pairing_without_a_negation_is_no_rotation():
    # x * a + x.flip(-1) * b pairs feature i with d - 1 - i, but negates neither: no rotary, nothing said
    x = torch.randn(2, 5, 8)
    with shapetrace.trace() as t:
        x * torch.rand(5, 8) + x.flip(-1) * torch.rand(5, 8)                # (2, 5, 8)
        x * torch.rand(5, 8) + torch.cat((x[..., 4:], x[..., :4]), -1) * torch.rand(5, 8)  # halves swapped, no sign
    assert t.analysis().rotaries == ()
    assert not [d for d in t.diagnostics if d.kind.startswith("rotary")]


def test_a_cast_that_returns_its_operand_keeps_the_rotation_checked():
    # transformers' DeepSeek-V3 and others cast the rotated half back (`rotate_half(q).to(q.dtype)`, a no-op
    # `.to` that returns the same tensor). The cast's record was taken for the rotation's producer, its chain
    # looped on itself and the replay raised KeyError (test_libraries.py's DeepSeek-V3 test, with transformers)
    def cast_back(x):
        return rotate_half(x).to(x.dtype)                                    # (B, H, T, d_k): the same tensor

    assert outcomes(traced(cast_back, "halves")) == [(PAIRED, HALVES)]
    assert outcomes(traced(cast_back, "interleaved"))[0][0] == MISMATCH


def test_the_axes_a_table_changes_along_are_read_from_its_values():
    """``varies``: the rotated tensor's axes along which the table's angles change (the tokens, axis 2,
    for a (T, d) table); ``still``: its axes of more than one entry where they do not. A table expanded over
    the batch and heads, or kept at one token, changes along no axis of more than one entry but the tokens."""
    [r] = traced(rotate_half, "halves").analysis().rotaries
    assert (r.varies, r.still, r.at_zero) == ((2,), (0, 1), False)
    [r] = traced(rotate_half, "halves", (2, 3, 1, 8)).analysis().rotaries   # one token, position 0
    assert (r.varies, r.still, r.at_zero) == ((), (0, 1), True)
    [r] = traced(rotate_half, "halves", (2, 3, 1, 8), start=5).analysis().rotaries
    assert (r.varies, r.at_zero) == ((), False)


def test_a_table_of_one_angle_per_sequence_turns_every_token_alike():
    """Positions read from the batch (``arange(B)`` expanded over the tokens): the table changes along B
    only, and the names say axis 2 holds the tokens: ``rotary-same-angle-every-token``. At B = T = H = 4."""
    B, H, T, d = 4, 4, 4, 8
    q = torch.randn(B, T, H * d)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(q, "B T D")
        x = q.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        positions = torch.arange(B)[:, None].expand(B, T)                  # (B, T): counts the batch
        f = positions[..., None].float() * (1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))  # (B, T, d/2)
        emb = torch.cat((f, f), -1)[:, None]                                # (B, 1, T, d)
        rope(x, emb, rotate_half)
    [r] = t.analysis().rotaries
    assert (r.varies, r.still) == ((0,), (1, 2))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-same-angle-every-token"]


def test_a_decoding_steps_key_rotated_at_position_0_is_found_by_the_name_its_join_gives_the_token_axis():
    """rules/rotary ``_restarts`` read the name of the axis the rotated key is appended along on the key
    itself; a decoding step's one token (an axis of one entry, which no name needs) has none there, only
    in the join's result (``T+1``). On 8110233 RoFormer's step rotated at position 0 (transformers PR
    #22416, tests/corpus/reports2/roformer_past_positions) was ``? checked 51 of 62 ops``, no finding."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.reports2 import roformer_past_positions as m

    t = traced_build(m, "positions-from-zero", m.DIMS[0])
    [d] = [d for d in t.diagnostics if d.severity == "error"]
    assert d.kind == "rotary-position-restarts"
    assert d.message.startswith("the rotary embedding rotated at reshape_as #54 turns [B=2, H=4, 1, 8] by position 0 "
                                "(its cos table is 1 and its sin table 0 on every feature), and cat #55 then "
                                "appends it along T+1 (axis 2) after 6 tokens: its position starts again at 0 "
                                "instead of continuing at 6")
    assert [d.kind for d in traced_build(m, "", m.DIMS[0]).diagnostics if d.severity != "note"] == []


def _reverse(table):
    """RoPER's reverse rotation (labmlai's ``ReverseRotaryPositionalEmbeddings``, tests/corpus/reports5/
    labml_roper_twice.py): ``x·cos − rotate_half(x)·sin``, the rotation by −θ."""
    B, H, T, d = 2, 3, 5, 8
    q = torch.randn(B, T, H * d)
    with torch.no_grad(), shapetrace.trace() as t:
        shapetrace.name(q, "B T D")
        x = q.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        f = freqs(T, d)                                                     # (T, d/2)
        emb = torch.cat((f, f), -1) if table == "halves" else f.repeat_interleave(2, -1)  # (T, d)
        x * emb.cos() - rotate_half(x) * emb.sin()                          # (B, H, T, d_k)
    return t


def test_a_rotation_by_minus_theta_is_a_rotary_and_its_pairing_is_read():
    """A difference of the two products is a rotation too (by −θ): on e15aeb2 only a sum was read, so RoPER's
    reverse rotation went unread (its table's ops unchecked: labml's correct file '? 47 of 53', now 51 of 53)
    and a table laid out the other way under it went unseen."""
    assert outcomes(_reverse("halves")) == [(PAIRED, HALVES)]
    t = _reverse("interleaved")
    assert outcomes(t) == [(MISMATCH, HALVES)]
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-pairing-mismatch"]


# -- the rotation written on halves (modded-nanogpt's Rotary, smolGPT's) --------------------------------------

def rope_on_halves(x, cos, sin, split: str = "slice"):
    """KellerJordan/modded-nanogpt's ``apply_rotary_emb`` (train_gpt.py): ``x1, x2`` the two halves of the
    features, ``y1 = x1·cos + x2·sin``, ``y2 = x1·(−sin) + x2·cos``, joined back; a ``(T, d/2)`` table."""
    d = x.shape[-1] // 2
    x1, x2 = x.chunk(2, dim=-1) if split == "chunk" else (x[..., :d], x[..., d:])   # (..., d/2) each
    y1 = x1 * cos + x2 * sin                                                # (..., d/2)
    y2 = x1 * (-sin) + x2 * cos                                             # (..., d/2)
    return torch.cat((y1, y2), -1)                                          # (..., d)


def traced_on_halves(head_first: bool, split: str = "slice", shape=(2, 3, 5, 8)):
    """smolGPT's attention (Om-Alve/smolGPT model.py): q ``(B, T, nh, hs)`` rotated before its transpose, or, as
    its issue #22 reports, after it, with the table built for ``x.shape[1]`` positions (the heads)."""
    B, H, T, d = shape
    q = torch.randn(B, T, H * d)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(q, "B T D")
        x = q.view(B, T, H, d)                                              # (B, T, H, d_k)
        if head_first:
            x = x.transpose(1, 2)                                           # (B, H, T, d_k)
        f = freqs(x.shape[1], d)                                            # (x.shape[1], d/2)
        cos, sin = f.cos()[None, :, None, :], f.sin()[None, :, None, :]     # (1, x.shape[1], 1, d/2)
        y = rope_on_halves(x, cos, sin, split)                              # like x
        if not head_first:
            y = y.transpose(1, 2)                                           # (B, H, T, d_k)
        y @ y.transpose(-2, -1)                                             # (B, H, T, T)
    return t


def test_a_rotation_on_halves_is_a_rotary_pairing_i_with_i_plus_half():
    """Found at its second sum (the first takes x1's table to x2's place in the second); its tables are read
    for where their angles change: the tokens (axis 1 of ``[B, T, H, d_k]``). On 6e2d55a: no rotary at all,
    and the table's ops unnamed (d/2) and unchecked: ``?``."""
    for split in ("slice", "chunk"):
        t = traced_on_halves(head_first=False, split=split)
        [r] = t.analysis().rotaries
        assert (r.outcome, r.partners, r.varies, r.still, r.at_zero) == (
            PAIRED, (4, 5, 6, 7, 0, 1, 2, 3), (1,), (0, 2), False)
        assert verdict_line(t.report().verdict).startswith("✓ checked all ")


def test_a_rotation_on_halves_of_head_first_q_turns_every_token_alike():
    """smolGPT issue #22: the table built for ``x.shape[1]`` = H positions and lined up with the heads of
    ``[B, H, T, d_k]``: its angles change along H and not along T. On 6e2d55a: ``?`` (no rotary found)."""
    t = traced_on_halves(head_first=True)
    [r] = t.analysis().rotaries
    assert (r.varies, r.still) == ((1,), (0, 2))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-same-angle-every-token"]


def test_sums_of_two_halves_that_are_no_rotation_are_no_rotary():
    """A learnt mix of two halves (one sum), and two sums whose tables do not cross over (each half keeps its
    own table in both): no rotary, and nothing said of one."""
    x = torch.randn(2, 5, 8)
    w = [torch.rand(4) for _ in range(4)]
    with shapetrace.trace() as t:
        x1, x2 = x[..., :4], x[..., 4:]                                     # (2, 5, 4) each
        x1 * w[0] + x2 * w[1]                                               # (2, 5, 4): one sum
        x1 * w[0] + x2 * w[1]                                               # the same tables again: no crossing
        x1 * w[2] + x2 * w[3]                                               # (2, 5, 4): other tables
    assert t.analysis().rotaries == ()
    assert not [d for d in t.diagnostics if d.kind.startswith("rotary")]


def rope_on_pairs(x, cos, sin):
    """karpathy/llama2.c's ``apply_rotary_emb`` (model.py; Meta's real-valued form, as ExecuTorch writes it):
    adjacent features as (real, imaginary) pairs, ``reshape(..., -1, 2).unbind(-1)``, joined back by
    ``stack(..., -1).flatten(3)``."""
    x_r, x_i = x.reshape(x.shape[:-1] + (-1, 2)).unbind(-1)                  # (B, T, H, d/2) each
    out_r = x_r * cos - x_i * sin                                           # (B, T, H, d/2)
    out_i = x_r * sin + x_i * cos                                           # (B, T, H, d/2)
    return torch.stack([out_r, out_i], dim=-1).flatten(3)                   # (B, T, H, d)


def test_a_rotation_on_adjacent_pairs_unbound_from_a_view_is_a_rotary():
    """The pieces are the two components of ``view(..., -1, 2)`` unbound: feature 2k pairs with 2k + 1. On
    b5bf555 no rotary was found (the unbind is no cut along the last axis of the same rank)."""
    B, H, T, d = 2, 3, 5, 8
    q = torch.randn(B, T, H * d)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(q, "B T D")
        x = q.view(B, T, H, d)                                              # (B, T, H, d_k)
        f = freqs(T, d)                                                     # (T, d/2)
        y = rope_on_pairs(x, f.cos()[None, :, None, :], f.sin()[None, :, None, :]).transpose(1, 2)  # (B, H, T, d_k)
        y @ y.transpose(-2, -1)                                             # (B, H, T, T)
    [r] = t.analysis().rotaries
    assert (r.outcome, r.partners, r.varies, r.still) == (PAIRED, (1, 0, 3, 2, 5, 4, 7, 6), (1,), (0, 2))


def rotate_written(halves: bool):
    """TransformerLens's ``rotate_every_two`` of 2023: a copy written into, ``rot_x[..., :n] = -x[..., n:]`` (by
    halves) or ``rot_x[..., ::2] = -x[..., 1::2]`` (interleaved)."""
    def rotate(x):
        rot_x = x.clone()
        if halves:
            n = x.size(-1) // 2
            rot_x[..., :n] = -x[..., n:]
            rot_x[..., n:] = x[..., :n]
        else:
            rot_x[..., ::2] = -x[..., 1::2]
            rot_x[..., 1::2] = x[..., ::2]
        return rot_x
    return rotate


def test_a_rotation_written_into_a_copy_is_replayed_with_its_writes():
    """Fails on 29b23f0 (no rotary found there: the copy's writes were not walked, and the rotation read as the
    clone alone): TransformerLens issue #364's GPT-J, an interleaved table rotated by halves through writes
    into ``x.clone()``, is ``rotary-pairing-mismatch``; each table under its own pairing is paired, at equal
    sizes too."""
    assert outcomes(traced(rotate_written(True), "halves")) == [(PAIRED, HALVES)]
    assert outcomes(traced(rotate_written(False), "interleaved")) == [(PAIRED, PAIRS)]
    assert outcomes(traced(rotate_written(True), "interleaved", (4, 4, 4, 8))) == [(MISMATCH, HALVES)]
    t = traced(rotate_written(True), "interleaved")
    (d,) = [d for d in t.diagnostics if d.kind == "rotary-pairing-mismatch"]
    assert d.severity == "error" and t.events[d.event].op == "__setitem__"
    assert "rotates features in pairs by halves (feature i with i + d/2, as rotate_half does)" in d.message


def test_a_write_of_other_values_into_the_copy_is_no_rotation():
    """A copy of x whose half is overwritten with values computed from x (not moved) rotates nothing."""
    def rotate(x):
        rot_x = x.clone()
        rot_x[..., :4] = x[..., 4:] * 2.0
        return rot_x
    assert outcomes(traced(rotate, "halves")) == []


def shifted(first_rotated: bool):
    """Keys (B, H, T, d_k) rotated at positions 0 … T-1 (or not rotated), then rotated again by one position
    T for every token (MemOS' re-rotation of a cached fragment to where it lands, issue #2315)."""
    B, H, T, d = 2, 3, 5, 8
    k = torch.randn(B, T, H * d)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        shapetrace.name(k, "B T D")
        x = k.view(B, T, H, d).transpose(1, 2)                              # (B, H, T, d_k)
        if first_rotated:
            f = freqs(T, d)
            x = rope(x, torch.cat((f, f), -1), rotate_half)                 # positions 0 … T-1
        f = freqs(1, d, start=T).expand(T, d // 2)                          # position T for every token
        rope(x, torch.cat((f, f), -1), rotate_half)
    return t


def test_a_constant_rotation_of_rotated_keys_is_a_shift_not_a_missing_position():
    """A rotation whose input is an earlier rotation's result (data moves only) shifts tokens that already
    carry their positions: ``Rotary.shifts``, and no ``rotary-same-angle-every-token``; the same constant
    rotation of keys never rotated still is one. Fails on 0b6df46 (the error on both; reports21's MemOS
    file's correct code got ✗)."""
    t = shifted(first_rotated=True)
    assert [(r.shifts, r.still) for r in t.analysis().rotaries] == [(False, (0, 1)), (True, (0, 1, 2))]
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    t = shifted(first_rotated=False)
    assert [(r.shifts, r.still) for r in t.analysis().rotaries] == [(False, (0, 1, 2))]
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["rotary-same-angle-every-token"]


def _chunk_after_cache(start: int, prefix: str):
    """A chunk of T = 4 keys rotated at positions ``start … start + 3`` (1-D rope), joined along the tokens
    after 6 entries: an input cache (``prefix == "cache"``), or the same keys' first entries kept unrotated
    (``"own"``: EVA's class token, made in the run)."""
    B, H, T, d = 2, 4, 4, 8
    x, cache = torch.randn(B, T, H * d), torch.randn(B, H, 6, d)
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        k = x.view(B, T, H, d).transpose(1, 2)                               # (B, H, T, d_k)
        f = torch.arange(start, start + T)[:, None].float() * (1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
        emb = torch.cat((f, f), -1)                                          # (T, d)
        k_rot = rope(k, emb, rotate_half)
        before = cache if prefix == "cache" else torch.cat([k, k], dim=2)[:, :, :6]
        torch.cat([before, k_rot], dim=2)
    return t


def test_a_chunk_whose_first_key_is_rotated_at_position_0_after_a_handed_in_cache_is_a_restart():
    """mlx-vlm issue #1737 (tests/corpus/reports26/mlxvlm_chunked_mrope_positions): a chunked prefill's later
    chunk rotated from the prompt's first positions and appended after the cache: its first token turns by
    position 0 (the others by 1, 2, 3), after 6 cached entries. Fails on 424f614 (no finding: only a rotation
    of one token, all at position 0, was read as a restart). Positions from 6 are right; entries made in the
    run (a class token kept unrotated before the rotated patches, EVA's) are no cache: nothing."""
    [d] = [d for d in _chunk_after_cache(0, "cache").diagnostics if d.severity == "error"]
    assert d.kind == "rotary-position-restarts"
    assert d.message.startswith("the rotary embedding rotated at cat #6 turns the first token of [B=2, H=4, T=4, "
                                "d_k=8] by position 0 (its cos table is 1 and its sin table 0 on every feature), "
                                "and cat #7 then appends it along T (axis 2) after 6 tokens: its position starts "
                                "again at 0 instead of continuing at 6"), d.message
    for start, prefix in ((6, "cache"), (0, "own")):
        assert [d.kind for d in _chunk_after_cache(start, prefix).diagnostics if d.severity == "error"] == []
