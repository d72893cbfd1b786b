"""``run --backward``'s use cases (:mod:`shapetrace.app.backward`): the same model at 2T, and the JSON's
``at_2T`` object."""

from __future__ import annotations

from types import SimpleNamespace

from shapetrace.app.backward import at_double_t, with_doubled
from shapetrace.attention.config import AttentionConfig


def test_the_same_model_at_2t_doubles_the_keys_too_in_cross_attention():
    seen = []

    def trace_at(config):
        seen.append((config.seq_len, config.kv_len, config.d_model))
        return SimpleNamespace(backward=ran)

    ran = SimpleNamespace(rows=("a row",))
    assert at_double_t(AttentionConfig(seq_len=3, kv_len=5), trace_at) == (6, ran)
    assert at_double_t(AttentionConfig(seq_len=4), trace_at) == (8, ran)
    assert seen == [(6, 10, AttentionConfig().d_model), (8, None, AttentionConfig().d_model)]
    assert at_double_t(AttentionConfig(seq_len=4), lambda c: SimpleNamespace(backward=None)) is None
    # a forward that raised at 2T (a --break whose view fails) ran no backward: no 2T totals are claimed
    no_rows = SimpleNamespace(rows=(), saved=("kept before it raised",))
    assert at_double_t(AttentionConfig(seq_len=4), lambda c: SimpleNamespace(backward=no_rows)) is None


def test_at_2t_joins_the_json_backward_object_only():
    doubled = (12, SimpleNamespace(saved_bytes=5, activation_bytes=4, weights_bytes=3))
    assert with_doubled({"backward": {}}, doubled) == {
        "backward": {"at_2T": {"T": 12, "saved_bytes": 5, "activation_bytes": 4, "weights_bytes": 3}}}
    assert with_doubled({"events": []}, doubled) == {"events": []}
    assert with_doubled({"backward": {}}, None) == {"backward": {}}
