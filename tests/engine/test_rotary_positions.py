"""shapetrace.engine.rotary_positions.one_position_per_token: a rotary table whose features all turn each token
by one position (1-D, whatever the positions: consecutive, offset per batch entry by left padding, restarted by
packing) against one that turns each token by a row and a column in separate features (Pixtral's and EVA's 2-D
rotary, CogVideoX's 3-D one), where which grid position each token takes is not in what torch records."""

from __future__ import annotations

import pytest
import torch

from shapetrace.engine.rotary_positions import one_position_per_token


def _inv_freq(d: int) -> torch.Tensor:
    return 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))                     # (d/2,)


def _tables(positions: torch.Tensor, d: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama's cos and sin for ``positions`` (any leading shape): ``cat((freqs, freqs), -1)``."""
    freqs = positions.float()[..., None] * _inv_freq(d)                             # (..., d/2)
    emb = torch.cat((freqs, freqs), dim=-1)                                         # (..., d)
    return emb.cos(), emb.sin()


def _grid_tables(rows: torch.Tensor, cols: torch.Tensor, d: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixtral's 2-D table at each token: rows on the even frequencies, columns on the odd ones."""
    f = _inv_freq(d)
    half = torch.cat([rows.float()[:, None] * f[::2], cols.float()[:, None] * f[1::2]], dim=-1)   # (N, d/2)
    emb = torch.cat((half, half), dim=-1)                                           # (N, d)
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("positions", [
    torch.arange(6),                                        # a prefill
    torch.arange(6) + 17,                                   # after 17 cached tokens
    torch.tensor([[1, 1, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]]),  # transformers' left padding (pads at position 1)
    torch.tensor([0, 1, 2, 0, 1, 2, 3]),                    # two packed sequences
    torch.arange(4).flip(0),                                # positions the wrong way round: still one per token
], ids=["prefill", "offset", "left-padded", "packed", "reversed"])
def test_a_1d_rotary_turns_each_token_by_one_position(positions):
    assert one_position_per_token(_tables(positions))


def test_a_2d_rotary_turns_each_patch_by_a_row_and_a_column():
    """A 2 x 3 image in raster order; and the same with rows and columns swapped (each patch turned by another
    patch's position): neither is one position per token, so neither table is counted checked."""
    rows, cols = torch.arange(2).repeat_interleave(3), torch.arange(3).repeat(2)   # (N,), (N,)
    assert not one_position_per_token(_grid_tables(rows, cols))
    assert not one_position_per_token(_grid_tables(cols, rows))


def test_a_2d_rotary_on_one_row_is_one_position_per_token():
    """An image one patch high: its rows never move, so its tables are a 1-D rotary along the columns."""
    cols = torch.arange(5)
    assert one_position_per_token(_grid_tables(torch.zeros(5, dtype=torch.long), cols))


def test_too_few_slow_features_to_tell_keeps_the_table():
    """Two features, both turning fast: nothing below a radian moves on two features, so nothing is claimed
    against the table (the old reading stands)."""
    angles = torch.tensor([[0.0, 0.0], [2.0, 3.0], [4.0, 6.0]])                     # (T, 2)
    assert one_position_per_token((angles.cos(), angles.sin()))


def test_a_step_whose_token_axis_is_named_only_in_the_cache_join_is_placed_and_checked():
    """tests/corpus/reports6/fla_cache_seen_tokens (fla-org/flash-linear-attention issue #766): the decoding
    step's key ``[B, 1, H, d]`` has a token axis of one entry and no name; the cache's ``cat`` names it ``T+1``.
    The position rule and the value check read that name through the join that places the token
    (:func:`.rotary.step_token_label`), so layer 1's key rotated at 7 and joined after 6 entries is an error, and
    the correct file's step tables count as checked. On 32891ff both were ``? checked 76 of 80`` with no finding."""
    from tests.corpus.helpers import findings, traced_build, verdict_line
    from tests.corpus.reports6 import fla_cache_seen_tokens

    t = traced_build(fla_cache_seen_tokens, "seen-tokens-early", "B=2 T=6 D=32 H=4")
    assert [(d.kind, d.event, d.message) for d in t.diagnostics if d.severity == "error"] == [(
        "rotary-position-off", 70,
        "the rotary embedding rotated at cat #70 turns [B=2, 1, H=4, d_k=8] by position 7 (its cos and sin tables "
        "hold that position's angles on every feature, read against the run's table of consecutive positions), but "
        "its token takes position 6: it is joined after 6 cached entries. q·k then reads its distance to every other "
        "token 1 off.")]
    t = traced_build(fla_cache_seen_tokens, "", "B=2 T=6 D=32 H=4")
    assert findings(t) == ()
    assert verdict_line(t).startswith("✓ checked all 80 ops that could carry a layout bug (8 of them on the values")


def test_a_step_rotated_before_its_transpose_and_rebuilt_from_halves_is_placed_and_checked():
    """tests/corpus/reports17/tinyllm_decode_offset (skyzh/tiny-llm PR #46): the rotation is written on the two
    halves of ``(B, L, H, d)`` (``cat([x1 cos - x2 sin, x2 cos + x1 sin], -1)``) before ``transpose(1, 2)``, and
    the cache joins the transposed keys (its first entry the prefill's key, transposed, not joined). Where the
    token goes is followed through the join that rebuilds the features, the transpose (its axes read back to the
    rotated tensor's own) and the cache's transposed entries, so the second step's key rotated at 12 and joined
    after 7 entries is an error, and the correct file's step keys count as checked. On 2243d41 both were
    ``? checked 93 of 109`` with no finding."""
    from tests.corpus.helpers import findings, traced_build, verdict_line
    from tests.corpus.reports17 import tinyllm_decode_offset

    dims = tinyllm_decode_offset.DIMS[0]
    t = traced_build(tinyllm_decode_offset, "offset-by-prompt", dims)
    assert [(d.kind, d.event, d.message) for d in t.diagnostics if d.severity == "error"] == [(
        "rotary-position-off", 91,
        "the rotary embedding rotated at __getitem__ #91 turns [B=2, 1, H_kv=2, d_k[4:8]=4] by position 12 (its cos "
        "and sin tables hold that position's angles on every feature, read against the run's table of consecutive "
        "positions), but its token takes position 7: it is joined after 7 cached entries. q·k then reads its "
        "distance to every other token 5 off.")]
    t = traced_build(tinyllm_decode_offset, "", dims)
    assert findings(t) == ()
    assert verdict_line(t).startswith(
        "? checked 101 of 109 ops that could carry a layout bug (16 of them on the values")
