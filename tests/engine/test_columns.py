"""shapetrace.engine.columns: which features of a multiplied table are equal, read at call time."""

from __future__ import annotations

import torch

from shapetrace.engine.columns import FEATURES, READ_LIMIT, feature_params

F = torch.tensor([[0.0, 0.0], [0.5, 1.0], [1.0, 2.0]])                      # (T=3, d/2=2): two frequencies


def classes(table, other_shape=(2, 4, 3, 4)):
    return feature_params((torch.zeros(other_shape), table), {})


def test_a_halves_table_pairs_i_with_i_plus_half():
    assert classes(torch.cat((F, F), -1)) == {FEATURES: (1, (0, 1, 0, 1))}


def test_an_interleaved_table_pairs_2k_with_2k_plus_1():
    assert classes(F.repeat_interleave(2, -1)) == {FEATURES: (1, (0, 0, 1, 1))}
    assert classes(torch.stack((F, F), -1).flatten(-2)) == {FEATURES: (1, (0, 0, 1, 1))}


def test_the_smaller_operand_is_read_in_either_position():
    table = torch.cat((F, F), -1)
    assert feature_params((table, torch.zeros(2, 4, 3, 4)), {}) == {FEATURES: (0, (0, 1, 0, 1))}


def test_what_is_not_read():
    table = torch.cat((F, F), -1)
    assert classes(table.to("meta")) == {}                                      # no values
    assert classes(table.long()) == {}                                          # not a float table
    assert classes(torch.zeros(READ_LIMIT // 2 + 1, 2), (2, READ_LIMIT // 2 + 1, 2)) == {}   # over the bound
    assert classes(torch.zeros(3, 1)) == {}                                     # one feature: nothing to pair
    assert feature_params((torch.zeros(3, 4), 2.0), {}) == {}                   # one tensor
