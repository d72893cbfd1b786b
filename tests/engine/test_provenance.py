"""engine/provenance.py: each output axis's source, read from a replay on coordinate tensors, checked
against what torch's own definition of each op says (sizes 1..5, equal sizes included)."""

import math

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from shapetrace.engine.provenance import (
    JOINED,
    PADDED,
    ROLLED,
    SELECTED,
    WALK,
    AxisSource,
    Data,
    Digit,
    Index,
    coordinates,
    sources,
)

shapes = st.lists(st.integers(1, 5), min_size=2, max_size=4).map(tuple)
#: every size 4: T = H = B = 4 must read exactly as distinct sizes do
equal = st.integers(2, 4).map(lambda n: (4,) * n)
any_shape = st.one_of(shapes, equal)


def row_major(shape):
    return [math.prod(shape[i + 1:]) for i in range(len(shape))]


def walk(*digits, operand=0):
    return AxisSource(WALK, ((operand, merged(digits)),))


def merged(digits):
    """Digits (major first) with neighbours that walk on as one (major stride = minor's span) merged:
    the replay reads the coarsest digits."""
    out = []
    for s, n in digits:
        if out and out[-1].stride == s * n:
            out[-1] = Digit(s, out[-1].size * n)
        else:
            out.append(Digit(s, n))
    return tuple(out)


def plain(shape, axis, operand=0):
    """The source of an axis that walks operand axis ``axis`` of ``shape`` in order."""
    n = shape[axis]
    return walk((row_major(shape)[axis], n), operand=operand) if n > 1 else AxisSource(WALK)


def only(result):
    assert result is not None and len(result) == 1
    return result[0]


def test_coordinates_hold_each_elements_position_offset_by_operand():
    a, b = coordinates([(2, 3), (4,)])
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert b.tolist() == [7, 8, 9, 10]


@settings(max_examples=40, deadline=None)
@given(any_shape, st.randoms(use_true_random=False))
def test_permute_walks_the_permuted_axis(shape, rng):
    order = list(range(len(shape)))
    rng.shuffle(order)
    got = only(sources(torch.permute, [Data(shape), tuple(order)]))
    assert got == tuple(plain(shape, i) for i in order)


@settings(max_examples=40, deadline=None)
@given(any_shape, st.data())
def test_flip_walks_backwards(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    got = only(sources(torch.flip, [Data(shape), (dim,)]))
    for j, source in enumerate(got):
        if j == dim and shape[j] > 1:
            assert source == walk((-row_major(shape)[j], shape[j]))
        else:
            assert source == plain(shape, j)


@settings(max_examples=40, deadline=None)
@given(any_shape, st.data())
def test_roll_is_a_rotated_walk(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    shift = data.draw(st.integers(1, 7))
    got = only(sources(torch.roll, [Data(shape), shift, dim]))
    n = shape[dim]
    if n == 2 and shift % n:   # a rotation of two is a reversal: the same elements, read as one
        assert got[dim] == walk((-row_major(shape)[dim], 2))
    elif n > 1 and shift % n:
        assert got[dim] == AxisSource(ROLLED, ((0, (Digit(row_major(shape)[dim], n),)),), (), shift % n)
    else:
        assert got[dim] == plain(shape, dim)
    assert all(s == plain(shape, j) for j, s in enumerate(got) if j != dim)


@settings(max_examples=40, deadline=None)
@given(any_shape, st.data())
def test_fold_of_two_axes_is_their_product_major_first(shape, data):
    """``rearrange('b n h d -> (b h) n d')``-style folds: the new axis is two digits, b major."""
    a, b = sorted(data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=2, max_size=2, unique=True)))
    rest = [i for i in range(len(shape)) if i not in (a, b)]
    folded = (shape[a] * shape[b], *[shape[i] for i in rest])
    got = only(sources(lambda t: t.permute(a, b, *rest).reshape(folded), [Data(shape)]))
    digits = tuple((row_major(shape)[i], shape[i]) for i in (a, b) if shape[i] > 1)
    assert got[0] == (walk(*digits) if digits else AxisSource(WALK))
    assert got[1:] == tuple(plain(shape, i) for i in rest)


@settings(max_examples=40, deadline=None)
@given(any_shape, st.data())
def test_gather_and_index_select_select_along_their_axis(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    picked = data.draw(st.integers(2, 5))
    index_shape = tuple(picked if i == dim else n for i, n in enumerate(shape))
    for got in (only(sources(torch.gather, [Data(shape), dim, Index(index_shape)])),
                only(sources(torch.index_select, [Data(shape), dim, Index((picked,))]))):
        if min(shape) > 1:
            assert got[dim] == AxisSource(SELECTED, along=((0, dim),))
        for j, source in enumerate(got):
            if j != dim:   # the other axes walk theirs (a gather's random index may also move there)
                assert source.kind == WALK and source.walks == plain(shape, j).walks


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 4), st.integers(2, 4), st.integers(2, 4), st.integers(1, 3))
def test_a_block_table_gather_selects_blocks_on_both_table_axes(blocks, size, heads, batch):
    """vLLM's paged attention reads ``k_cache[block_table]``: ``[num_blocks, block_size, H, d]`` indexed
    by a ``[B, max_blocks]`` table gives ``[B, max_blocks, block_size, H, d]``."""
    cache = (blocks + 3, size, heads, 4)
    got = only(sources(lambda c, t: c[t], [Data(cache), Index((batch, 3))]))
    assert got[1] == AxisSource(SELECTED, along=((0, 0),))
    assert got[0] == (AxisSource(SELECTED, along=((0, 0),)) if batch > 1 else AxisSource(WALK))
    assert got[2:] == tuple(plain(cache, i) for i in (1, 2, 3))


@settings(max_examples=40, deadline=None)
@given(any_shape, st.data())
def test_cat_joins_on_its_axis_and_walks_each_operand_elsewhere(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    other = tuple(data.draw(st.integers(1, 3)) if i == dim else n for i, n in enumerate(shape))
    got = only(sources(lambda a, b: torch.cat([a, b], dim), [Data(other), Data(shape)]))
    assert got[dim].kind == JOINED
    for j, source in enumerate(got):
        if j != dim and shape[j] > 1:
            assert source.walks == ((0, ((Digit(row_major(other)[j], shape[j])),)),
                                    (1, ((Digit(row_major(shape)[j], shape[j])),)))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_head_major_cat_of_split_is_heads_major_over_batch(b, t, h, d):
    """Kyubyong/transformer: ``torch.cat(torch.split(Q, d_k, dim=2), dim=0)`` folds heads in front of the
    batch: ``(H·B)``, never a join of batch with itself."""
    shape = (b, t, h * d)
    got = only(sources(lambda x: torch.cat(torch.split(x, d, dim=2), dim=0), [Data(shape)]))
    digits = tuple((s, n) for s, n in ((d, h), (t * h * d, b)) if n > 1)
    assert got[0] == (walk(*digits) if digits else AxisSource(WALK))
    assert got[1] == plain(shape, 1)
    assert got[2] == (walk((1, d)) if d > 1 else AxisSource(WALK))


@settings(max_examples=40, deadline=None)
@given(any_shape, st.data())
def test_expand_repeat_and_repeat_interleave_copy_with_stride_zero(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    times = data.draw(st.integers(2, 3))
    ones = tuple(1 if i == dim else n for i, n in enumerate(shape))
    expanded = only(sources(lambda x: x.expand(*[times if i == dim else n for i, n in enumerate(shape)]),
                            [Data(ones)]))
    assert expanded[dim] == walk((0, times))
    reps = [times if i == dim else 1 for i in range(len(shape))]
    tiled = only(sources(lambda x: x.repeat(*reps), [Data(shape)]))
    n, step = shape[dim], row_major(shape)[dim]
    assert tiled[dim] == walk((0, times), *(((step, n),) if n > 1 else ()))
    interleaved = only(sources(lambda x: x.repeat_interleave(times, dim), [Data(shape)]))
    assert interleaved[dim] == walk(*(((step, n),) if n > 1 else ()), (0, times))


@settings(max_examples=30, deadline=None)
@given(any_shape, st.data())
def test_pad_runs_into_filled_values(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    amounts = [0, 0] * len(shape)
    amounts[2 * (len(shape) - 1 - dim)] = 1
    got = only(sources(lambda x: F.pad(x, amounts), [Data(shape)]))
    assert got[dim] == AxisSource(PADDED)
    assert all(s == plain(shape, j) for j, s in enumerate(got) if j != dim)


def test_split_gives_one_source_per_piece_and_windows_walk_overlapping():
    pieces = sources(lambda x: torch.split(x, 2, dim=1), [Data((3, 4))])
    assert pieces == [(walk((4, 3)), walk((1, 2)))] * 2
    windows = only(sources(lambda x: x.unfold(1, 3, 1), [Data((2, 5))]))
    assert windows == (walk((5, 2)), walk((1, 3)), walk((1, 3)))


def test_a_call_that_raises_or_is_too_large_has_no_sources():
    assert sources(lambda x: x.view(7), [Data((2, 3))]) is None
    assert sources(torch.flip, [Data((1 << 21,)), (0,)]) is None
    assert sources(torch.flip, [Data((2, 0, 3)), (0,)]) is None        # no elements to follow
    assert sources(lambda x: x[:, :0], [Data((2, 3))]) is None
