"""shapetrace.engine.columns: a product's smaller operand kept as a possible rotary table, and which of
its features hold equal columns."""

from __future__ import annotations

import torch

from shapetrace.engine.columns import COMPARE_LIMIT, READ_LIMIT, feature_classes, kept_table

F = torch.tensor([[0.0, 0.0], [0.5, 1.0], [1.0, 2.0]])                      # (T=3, d/2=2): two frequencies


def test_a_halves_table_pairs_i_with_i_plus_half():
    assert feature_classes(torch.cat((F, F), -1)) == (0, 1, 0, 1)


def test_an_interleaved_table_pairs_2k_with_2k_plus_1():
    assert feature_classes(F.repeat_interleave(2, -1)) == (0, 0, 2, 2)
    assert feature_classes(torch.stack((F, F), -1).flatten(-2)) == (0, 0, 2, 2)


def test_columns_compare_over_every_leading_axis():
    table = torch.cat((F, F), -1).expand(2, 1, 3, 4).clone()                # (B, 1, T, d)
    table[1, 0, 2, 2] = 7.0                                                 # feature 2 differs from 0 once
    assert feature_classes(table) == (0, 1, 2, 1)


def test_comparisons_over_the_bound_are_not_made():
    assert feature_classes(torch.zeros(COMPARE_LIMIT // 64 // 64 + 1, 64)) is None


def test_the_smaller_operand_is_kept_as_a_copy_in_either_position():
    table = torch.cat((F, F), -1)
    position, kept = kept_table((torch.zeros(2, 4, 3, 4), table), 1 << 20)
    assert position == 1 and torch.equal(kept, table) and kept.data_ptr() != table.data_ptr()
    assert kept_table((table, torch.zeros(2, 4, 3, 4)), 1 << 20)[0] == 0


def test_what_is_not_kept():
    table = torch.cat((F, F), -1)
    other = torch.zeros(2, 4, 3, 4)
    assert kept_table((other, table.to("meta")), 1 << 20) is None                 # no values
    assert kept_table((other, table.long()), 1 << 20) is None                     # not a float table
    assert kept_table((other, torch.nn.Parameter(table)), 1 << 20) is None        # a learnt parameter
    assert kept_table((other, torch.zeros(3, 1)), 1 << 20) is None                # one feature: nothing to pair
    assert kept_table((other, table), 8) is None                                  # over the trace's budget
    big = torch.zeros(READ_LIMIT // 2 + 1, 2)
    assert kept_table((torch.zeros(2, *big.shape), big), 1 << 30) is None         # over the read bound
    assert kept_table((other, 2.0), 1 << 20) is None                              # one tensor
