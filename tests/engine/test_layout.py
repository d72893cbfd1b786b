"""Layout maths against torch: every drawn block holds exactly the elements its label names."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from layout_chains import chains

from shapetrace.engine.layout import Elided, Layout, is_contiguous, overlapping, row_major


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_every_block_label_names_the_elements_at_its_address(case):
    base, t, heads, dims = case
    lay = Layout(t.shape, t.stride(), t.storage_offset(), dims, heads=heads)
    assert lay.contiguous == t.is_contiguous()
    assert lay.reason() == "" if t.is_contiguous() else lay.reason() != ""
    assert not lay.irregular
    covered = 0
    previous_end = None
    for block in lay.blocks():
        stored = base[block.address:block.address + block.length]
        shown = t[block.selectors()].reshape(-1)
        assert torch.equal(stored, shown), (block, t.shape, t.stride())
        for d, i in enumerate(block.index):  # stride-0 axes: every index reads the same memory
            if i is None:
                assert t.stride(d) == 0
                assert torch.equal(t.select(d, t.shape[d] - 1)[tuple(s for k, s in enumerate(
                    block.selectors()) if k != d)].reshape(-1), stored)
        if previous_end is not None:
            assert block.address == previous_end + block.gap_before
            assert block.gap_before >= 0
        previous_end = block.address + block.length
        covered += block.length
    repeats = math.prod(s for s, d in zip(t.shape, t.stride()) if d == 0 and s > 1)
    assert covered * repeats == t.numel()


@settings(max_examples=150, deadline=None)
@given(chains())
def test_walk_steps_match_the_addresses_torch_visits(case):
    base, t, _heads, dims = case
    lay = Layout(t.shape, t.stride(), t.storage_offset(), dims)
    walk = lay.walk()
    live = [i for i, s in enumerate(t.shape) if s > 1]
    addresses = t.reshape(-1) if not walk.unit.endswith(")") else t.select(live[-1], 0).reshape(-1)
    addresses = [int(a) for a in addresses]  # base is arange: a value is its own address
    deltas = [b - a for a, b in zip(addresses, addresses[1:])]
    sizes = [s.repeats + 1 for s in walk.steps]  # innermost first
    expected = []
    counter = [0] * len(sizes)
    for _ in range(len(addresses) - 1):
        k = 0
        while counter[k] == sizes[k] - 1:
            counter[k] = 0
            k += 1
        counter[k] += 1
        expected.append(walk.steps[k].delta)
    assert deltas == expected


def test_transposed_heads_walk_and_reason():
    lay = Layout((2, 8, 6, 64), (3072, 64, 512, 1), 0, ("B", "H", "T", "d_k"))
    assert lay.walk().text() == "+512 ×5 to the next T, then back −2,496 to the next H, then +64 to the next B"
    assert lay.reason().startswith("H comes before T in the shape, but H's stride (64) is smaller than T's (512)")
    assert (lay.n_blocks, lay.block_len, lay.key_name, lay.period()) == (96, 64, "H", 1)
    assert [lay.block(k).label for k in (0, 1, 8, 95)] == ["0,0,0,:", "0,1,0,:", "0,0,1,:", "1,7,5,:"]


def test_d_is_cut_per_head_when_heads_are_known():
    lay = Layout((2, 6, 512), (3072, 512, 1), 0, ("B", "T", "D"), heads=8)
    assert (lay.n_blocks, lay.block_len, lay.key_name) == (96, 64, "head of D")
    b = lay.block(3)
    assert (b.label, b.address, b.key) == ("0,0,192:256", 192, 3)
    plain = Layout((2, 6, 512), (3072, 512, 1), 0, ("B", "T", "D"))
    assert (plain.n_blocks, plain.key_name) == (12, "T")


def test_elision_keeps_first_and_last_blocks():
    lay = Layout((2, 8, 6, 64), (3072, 64, 512, 1), 0, ("B", "H", "T", "d_k"))
    items = lay.strip(5, 3)
    assert [type(i).__name__ for i in items] == ["Block"] * 5 + ["Elided"] + ["Block"] * 3
    assert items[0].number == 0 and items[-1].number == 95
    assert items[5] == Elided(96 - 8)
    assert len(lay.strip(60, 40)) == 96  # everything fits: no ellipsis


def test_huge_layout_costs_only_the_drawn_blocks():
    lay = Layout((4096, 4096, 4096), (1, 4096 * 4096, 4096), 0, ("B", "T", "D"))
    assert (lay.n_blocks, lay.block_len, lay.names[lay.run_dim]) == (4096 ** 2, 4096, "B")
    items = lay.strip(2, 2)
    assert items[-1].address == 4096 ** 3 - 4096 and items[-1].label == ":,4095,4095"
    assert isinstance(items[2], Elided) and items[2].count == 4096 ** 2 - 4


def test_gaps_from_narrow_and_stride_zero_from_expand():
    x = torch.arange(2 * 6 * 8, dtype=torch.float32).view(2, 6, 8)
    n = x.narrow(2, 2, 4)
    lay = Layout(n.shape, n.stride(), n.storage_offset(), ("B", "T", "D"))
    assert lay.gaps() == [4] and lay.block(0).address == 2
    assert "4 in between belong to something else" in lay.reason()
    e = torch.zeros(6, 1, 8).expand(6, 3, 8)
    lay = Layout(e.shape, e.stride(), 0, ("T", "H", "d_k"))
    assert lay.block(0).label == "0,*,:" and "stride 0" in lay.reason()


@pytest.mark.parametrize("shape,stride", [((2, 3), (3, 1)), ((2, 3), (1, 2)), ((4, 1, 3), (3, 99, 1)),
                                          ((3, 3), (1, 1)), ((2, 2), (0, 1))])
def test_stride_facts_agree_with_torch(shape, stride):
    t = torch.empty_strided(shape, stride)
    assert is_contiguous(shape, stride) == t.is_contiguous()
    assert row_major(shape) == torch.empty(shape).stride()
    assert overlapping(shape, stride) == (stride in ((1, 1),))


def test_docstring_examples_of_the_engine_modules():
    import doctest

    import shapetrace.app.chain
    import shapetrace.engine.hidden
    import shapetrace.engine.layout
    import shapetrace.engine.viewfail

    for module in (shapetrace.engine.layout, shapetrace.app.chain, shapetrace.engine.viewfail,
                   shapetrace.engine.hidden):
        result = doctest.testmod(module)
        assert result.attempted >= 3 and result.failed == 0, module.__name__
