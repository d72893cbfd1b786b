"""Cumulative lengths of documents packed in a row are offsets along the tokens, never one number per batch entry.

allenai/OLMo-core's ``Attention`` takes ``cu_doc_lens`` (``[0, 2, T]``: two documents in each row; flash-attn's
``cu_seqlens`` is the same convention) beside ``x`` (tests/corpus/reports7/olmo_packed_positions.py). At a batch
of 3 the tensor is as long as the batch, and the sizes alone named it ``[B]``: the dependency check then cut it to
"batch entry 0" (``[0, 0]``), which merged the documents, and printed a false ``✗ batch-entries-mix`` on correct
code ("output token 2 of batch 0 depends on the other batch entries' tokens"). Now an argument whose values run
from 0, never falling, up to the length of an axis of the call's tensors is read as offsets
(shapetrace/engine/unread.py ``token_offsets``): not seeded ``[B]``, not a batch companion.
"""

from __future__ import annotations

import pytest
import torch

from shapetrace.engine.unread import token_offsets
from tests.corpus.helpers import traced_build
from tests.corpus.reports7 import mha_padding_inverted, olmo_packed_positions


@pytest.mark.parametrize(("values", "lengths", "offsets"), [
    ([0, 2, 6], {6, 32}, True),          # two documents in a row of 6
    ([0, 2, 2, 6], {6}, True),           # an empty document
    ([0, 3, 7], {6}, False),             # ends past the row
    ([6, 4, 2], {6}, False),             # lengths, one per entry
    ([0, 4, 2], {6, 2}, False),          # falls
    ([0], {6}, False),                   # one value: nothing packed
])
def test_offsets_are_read_on_the_values(values, lengths, offsets):
    assert token_offsets(torch.tensor(values), lengths) is offsets
    assert token_offsets(torch.tensor(values, dtype=torch.float32), lengths) is False


@pytest.mark.parametrize("dims", ["B=3 T=6 D=32 H=4", "B=3 T=9 D=32 H=4"])
def test_documents_packed_at_a_batch_as_long_as_their_offsets_keep_every_contract(dims):
    line = traced_build(olmo_packed_positions, "", dims, dependencies=True).report().verdict.line
    assert line.startswith("✓ checked all 25 ops that could carry a layout bug"), line
    assert "held on the values: batch entries stay apart, each token depends on itself, the causal mask holds" \
        in line, line


def test_lengths_one_per_entry_are_still_the_batchs():
    """mha_padding_inverted's lengths ``[B]`` (no offsets: they start at the first entry's length) keep their
    reading: a padding mask built from them, whose pads were not measured unread."""
    line = traced_build(mha_padding_inverted, "", mha_padding_inverted.DIMS[0], dependencies=True).report() \
        .verdict.line
    assert "not proven: the pads of a mask the model builds from its lengths were not measured unread" in line, line
