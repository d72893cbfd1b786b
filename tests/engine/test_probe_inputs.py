"""The dependency contracts of a model fed token ids (:mod:`shapetrace.engine.probe_inputs`): the ids are
moved where they become floats, and where that cannot be done the verdict says what was not measured
and why (issue 33: contracts never silently unmeasured). Each case at distinct sizes and at B = T = 4."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from shapetrace.engine.heads import HEADS
from shapetrace.engine.probe_inputs import batch_attended, companions


class GPT(nn.Module):
    """karpathy/nanoGPT model.py ``GPT.forward``: ``tok_emb = self.transformer.wte(idx)``, ``pos =
    torch.arange(0, t)``, ``pos_emb = self.transformer.wpe(pos)``, one causal block (``bias`` buffer,
    ``masked_fill(... == 0, -inf)``), ``lm_head``. Bugs: ``mask-transposed`` (the upper triangle: the
    future); ``pad-feature``: a padding flag made floats from the ids alone and added to every feature
    (``(idx == 0).float()``), a second way in for the ids."""

    def __init__(self, vocab=11, n_embd=32, n_head=4, block_size=8, bug=None):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)                                  # (T,)
        x = self.wte(idx) + self.wpe(pos)                                          # (B, T, C)
        if self.bug == "pad-feature":
            x = x + (idx == 0).float()[..., None]                                  # (B, T, 1)
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                         # (B, T, C) each
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))           # (B, nh, T, T)
        mask = self.bias[:, :, :T, :T]                                             # (1, 1, T, T)
        if self.bug == "mask-transposed":
            mask = mask.transpose(-2, -1)                                          # (1, 1, T, T)
        att = F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)         # (B, nh, T, T)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)                   # (B, T, C)
        return self.lm_head(x + self.c_proj(y))                                    # (B, T, vocab)


SIZES = [(2, 6), (4, 4)]


def _traced(bug, B, T):
    torch.manual_seed(0)
    model, idx = GPT(bug=bug).eval(), torch.randint(1, 11, (B, T))
    with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D=32 H=4") as t:
        t.check_dependencies()
        shapetrace.name(idx, "B T")
        model(idx)
    return t


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_model_fed_token_ids_has_its_contracts_measured_at_the_embedding(B, T):
    """742b81f measured nothing here and said nothing (the probe moved floating-point inputs only)."""
    t = _traced(None, B, T)
    assert t.contracts == [BATCH, OWN_TOKEN, CAUSAL, HEADS]
    assert t.unmeasured == []
    assert t.report().verdict.line.endswith(
        f"held on the values: {BATCH}, {OWN_TOKEN}, {CAUSAL}, {HEADS}")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_transposed_causal_mask_behind_an_embedding_leaks_the_future_on_the_values(B, T):
    t = _traced("mask-transposed", B, T)
    leaks = [d for d in t._measured()[0] if d.kind == "causal-mask-leaks"]
    assert [d.message.split(", a later token")[0] for d in leaks] == [
        f"measured on the values: output token 0 of batch 0 depends on input token {T - 1}"]
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_ids_made_floats_twice_are_not_moved_and_the_verdict_says_why(B, T):
    t = _traced("pad-feature", B, T)
    assert t.contracts == [HEADS]   # (moved at the splits: no ids to move)
    reason = ("batch entries stay apart, each token depends on itself (the token ids turn into floats along 2 "
              "paths (first seen at #0 embedding and #2 __getitem__): which one carries the tokens cannot be told)")
    assert t.unmeasured[0] == reason
    assert f"not measured: {reason}" in t.report().verdict.line


def test_a_pooled_output_says_the_token_contracts_it_could_not_read():
    """A classifier pooled at the last token (``[B, D]``: no token axis) holds the batch contract on
    the values; each token's own and the causal mask are not read there, and the verdict says so."""
    torch.manual_seed(0)
    model, idx = GPT().eval(), torch.randint(1, 11, (2, 6))
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        t.check_dependencies()
        shapetrace.name(idx, "B T")
        pooled = _Pooled(model)
        pooled(idx)
    assert t.contracts == [BATCH, HEADS]
    assert t.unmeasured == [f"{OWN_TOKEN}, {CAUSAL} (the output has no token axis)"]


class _Pooled(nn.Module):
    # transformers' GPT2ForSequenceClassification (v4.20): ``sequence_lengths = torch.ne(input_ids,
    # pad_token_id).sum(-1) - 1`` and ``logits[torch.arange(batch_size), sequence_lengths]``
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids):
        logits = self.gpt(input_ids)                                               # (B, T, V)
        sequence_lengths = torch.ne(input_ids, 0).sum(-1) - 1                      # (B,)
        return logits[torch.arange(input_ids.shape[0]), sequence_lengths]          # (B, V)


def _companions(*tensors, batch=2):
    return companions((torch.zeros(batch, 6, 8), *tensors), {}, 0, batch, lambda t: (None,) * t.dim(),
                      lambda label: None)


def test_a_companion_the_same_all_along_its_one_batch_sized_axis_is_cut_there():
    # position_ids = torch.arange(T).unsqueeze(0).expand(B, T) (transformers' Llama before 4.38): stride 0
    expanded = torch.arange(6).unsqueeze(0).expand(2, 6)                       # (B, T)
    assert _companions(expanded) == ((1, 0),)
    assert _companions(expanded.contiguous()) == ((1, 0),)                    # (the same values, copied)


def test_a_companion_that_differs_along_or_has_two_batch_sized_axes_stops_the_contracts():
    left_padded = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])      # (B, T): attention_mask.cumsum(-1) - 1
    assert _companions(left_padded) == ("argument 2 [2, 6] has an unnamed axis as long as the batch: which of its "
                                        "axes is the batch cannot be told")
    square = torch.arange(4).unsqueeze(0).expand(4, 4)                         # (B, T) at B = T = 4
    assert _companions(square, batch=4).startswith("argument 2 [4, 4] has an unnamed axis")


def test_tokens_of_another_sequence_are_told_apart_from_the_same_sequence_grown_or_cut():
    from shapetrace.engine.probe_inputs import other_sequence

    assert other_sequence(("B", "S", "D"), 1, ("B", "T", "D"), 1) == (
        "the input's tokens (S) are another sequence than the output's (T)")
    assert other_sequence(("B", "N", "D"), 1, ("B", "1+N", "D"), 1) is None
    assert other_sequence(("B", "T", "D"), 1, ("B", "T[-1:]", "D"), 1) is None
    assert other_sequence(("B", "T", "D"), 1, ("B", "D"), None) is None


def test_attention_across_the_batch_by_design_is_not_measured_as_batch_mixing():
    """SAINT's intersample attention (tests/corpus/public18/saint_intersample.py): ``rearrange(x, 'b n d -> 1 b
    (n d)')`` folds each row's tokens into its features and the rows of the batch attend to each other by design.
    On a8dba97 the contracts called the correct file ``✗ batch-entries-mix`` (a false error); the batch contract
    is now not measured there, and the verdict says why (``probe_inputs.batch_attended``)."""
    from tests.corpus.public18 import saint_intersample

    model, inputs = saint_intersample.build("")
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        t.check_dependencies()
        model(*inputs)
    report = t.report()
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert BATCH not in report.contracts
    assert "the code attends across its batch entries: softmax #26 weighs the B entries against each other, no " \
           "token axis beside them, so each entry's output depends on the others by design" in \
           " ".join(report.verdict.line.split())
    assert report.verdict.mark == "?"


class _SeqFirstFedBatchFirst(nn.Module):
    """Seq-first attention (``einsum('ibd,jbd->bij')``: axis 0 the tokens) fed ``[B, T, D]``: its softmax runs over
    the batch entries with the tokens left in a batch axis beside them, a bug, not a design."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):                                                          # (B, T, D) read as (T, B, D)
        scores = torch.einsum("ibd,jbd->bij", x, x) / x.shape[-1] ** 0.5          # (T, B, B)
        return self.proj(torch.einsum("bij,jbd->ibd", scores.softmax(-1), x))


def test_seq_first_code_fed_batch_first_is_still_measured_as_batch_mixing():
    """The guard of the test above: weights over the batch with the tokens beside them are no design: nothing
    excuses them from the batch contract, and the rules call them ``attends-over-batch`` (as on a8dba97)."""
    torch.manual_seed(0)
    model = _SeqFirstFedBatchFirst(32).eval()
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        model(x)
    assert batch_attended(t.events, t.namer.role) is None
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["attends-over-batch"]



def test_a_second_sequence_as_long_as_the_input_stops_the_contracts_where_names_came_from_sizes():
    """rexrex9/nlp_torchtext PR #2's correct decoder (tests/corpus/reports29/torchtext_cross_query_roles.py) takes
    the target ids, the source ids and the encoder output, S = T: the probe's input is the first float argument
    (the encoder output), every name came from sizes alone, and on 6e894e7 the contracts moved a *source* token
    and read the decoder's outputs as if they were that sequence: ``✗ causal-mask-leaks`` on correct code (the
    full cross-attention reads every source token). The target ids ``[B, T]`` beside it are a second sequence
    as long as the input: which one the outputs follow cannot be told, so nothing is measured. A 0/1 mask, positions
    (they run up along the tokens) and floats (a key beside its query) do not stop them (the first version of this
    rule stopped DeepSeek's positions and a separate key: 4 tests failed); with names not from sizes (``tokens``
    0) the ids are no reason either."""
    ids = torch.tensor([[3, 7, 2, 9, 4, 5], [8, 1, 6, 2, 0, 0]])                # (B, T): token ids
    mask = (ids != 0).long()                                                    # (B, T): 0/1

    def named(*tensors, tokens=6):
        return companions((torch.zeros(2, 6, 8), *tensors), {}, 0, 2, lambda t: ("B", "T", "D")[:t.dim()],
                          {"B": "batch", "T": "tokens"}.get, tokens=tokens)

    assert named(ids) == ("names were found from sizes alone, and argument 2 [2, 6] holds a sequence as long as "
                          "the input's: which one the output's tokens follow cannot be told")
    assert named(mask) == ((1, 0),)
    assert named(torch.arange(6).expand(2, 6).contiguous()) == ((1, 0),)         # positions run up: not stopped
    assert named(torch.randn(2, 6, 8)) == ((1, 0),)                             # a key beside its query: floats
    assert named(ids, tokens=0) == ((1, 0),)


def test_a_decoder_given_its_memory_first_at_equal_lengths_claims_no_leak():
    """The CLI's reading of that file (``shapetrace trace FILE --dims "B=2 T=6 S=6 D=32 H=4"``, contracts
    measured): ``✗ causal-mask-leaks`` on 6e894e7, ``?`` now, with the reason in the verdict."""
    from tests.corpus.reports29 import torchtext_cross_query_roles as module

    model, inputs = module.build("")
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=6 D=32 H=4") as t:
        t.check_dependencies()
        model(*inputs)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert "dec_inputs [2, 6] holds a sequence as long as the input's" in " ".join(t.report().verdict.line.split())
    assert t.report().verdict.mark == "?"
