"""The dependency contracts, measured on the values (issue 33 item 5): batch entries stay apart, each
token depends on itself, a declared causal mask holds. Each buggy case has a correct twin, at distinct
sizes and at equal ones (B = T = H = 4, named explicitly: equal sizes never decide a name)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import shapetrace
from shapetrace.engine.dependencies import BATCH, CAUSAL, OWN_TOKEN
from shapetrace.engine.heads import HEADS


class CausalSelfAttention(nn.Module):
    """In the style of nanoGPT's CausalSelfAttention (karpathy/nanoGPT, model.py): a ``tril`` buffer
    sliced to ``[:, :, :T, :T]`` and filled with -inf where it is 0."""

    def __init__(self, n_embd=32, n_head=4, block_size=8, bug=None):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))                  # (1, 1, bs, bs)
        self.register_buffer("pe", torch.randn(block_size, n_embd))                    # (bs, C)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        B, T, C = x.size()                                                         # (B, T, C)
        if self.bug == "pe-by-batch-place":   # the seq-first tutorial's pe[:x.size(0)] fed batch-first input
            x = x + self.pe[:x.size(0)].unsqueeze(1)                               # (B, 1, C) -> (B, T, C)
        elif self.bug == "pe-by-token":   # its twin: the table cut to the tokens and broadcast over the batch
            x = x + self.pe[:x.size(1)]                                            # (T, C) -> (B, T, C)
        if self.bug == "layernorm-over-batch":
            # a hand-written LayerNorm (the Annotated Transformer's) with the mean over dim 0
            x = (x - x.mean(0, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)   # (B, T, C)
        else:
            x = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)  # (B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                         # (B, T, C) each
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)            # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))           # (B, nh, T, T)
        mask = self.bias[:, :, :T, :T]                                             # (1, 1, T, T)
        if self.bug == "mask-transposed":   # the upper triangle: each query sees the future
            mask = mask.transpose(-2, -1)                                          # (1, 1, T, T)
        att = F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1)         # (B, nh, T, T)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)                   # (B, T, C)
        if self.bug == "shifted":   # outputs shifted one token late (a teacher-forcing shift done twice)
            y = y.roll(1, dims=1)                                                  # (B, T, C)
        return self.c_proj(y)


def _traced(bug, B, T):
    torch.manual_seed(0)
    model = CausalSelfAttention(bug=bug)
    x = torch.randn(B, T, 32)
    with shapetrace.trace(dims=f"B={B} T={T} D=32 H=4") as t:
        t.check_dependencies()
        shapetrace.name(x, "B T D")
        model(x)
    return t, model


SIZES = [(2, 5), (4, 4)]


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_correct_causal_attention_holds_every_contract(B, T):
    t, model = _traced(None, B, T)
    report = t.report()
    assert [d.kind for d in report.diagnostics if d.severity != "note"] == []
    assert report.contracts == [BATCH, OWN_TOKEN, CAUSAL, HEADS]
    assert model.calls == 1   # the measuring run left the model's attributes as they were
    assert model.training


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_transposed_causal_mask_leaks_the_future(B, T):
    """Two witnesses of one bug, one finding: the mask's values hide exactly the past (rules/directions.py
    says so), and the values measured after the run back it under the same finding (rules/causes.py)."""
    t, _ = _traced("mask-transposed", B, T)
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["causal-mask-reversed"]
    assert found[0].message.endswith(
        f"a causal mask reversed, so each token attends to the future and not to the past. On the values: output "
        f"token 0 of batch 0 depends on input token {T - 1}, a later token, though the code declares a causal mask "
        "(the attention weights are zero below the diagonal): the mask lets queries see the future (reversed, or "
        "not applied), or another op brings a later token in (a softmax, sum or FFT over the tokens).")
    assert [d.kind for d in t._measured()[0]] == ["causal-mask-leaks"]
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_mean_over_the_batch_mixes_batch_entries(B, T):
    t, _ = _traced("layernorm-over-batch", B, T)
    found = [d for d in t.diagnostics if d.severity == "error"]
    assert [d.kind for d in found] == ["batch-entries-mix"]
    # entry 0's batch-mate differs from its own batch: the mean over the batch moves every token of it
    assert found[0].message == (
        "measured on the values: output token 0 of batch 0 depends on the other batch entries' tokens (it "
        f"changes when batch 0 runs beside another sequence instead of its own batch, as do {T} output tokens of "
        "it in all). Batch entries must never mix: an axis was regrouped or reduced across the batch, or a size "
        "was read from the batch axis.")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_outputs_shifted_a_token_late_ignore_their_own_token(B, T):
    t, _ = _traced("shifted", B, T)
    kinds = [d.kind for d in t.diagnostics if d.severity == "error"]
    assert kinds == ["token-ignores-itself", "causal-mask-leaks"]
    assert t.diagnostics[0].message == (
        f"measured on the values: output token {T - 1} of batch 0 does not change when its own input token "
        "changes: each output token must depend on its own input token.")


@pytest.mark.parametrize(("B", "T"), SIZES)
def test_a_table_read_by_batch_place_is_said_so_not_blamed_on_a_token(B, T):
    """songyangco/GETNext issue #2: the PyTorch tutorial's sequence-first ``pe[:x.size(0)]`` fed batch-first
    input gives batch entry b the table's row b. The token contracts compare entry 0 at batch place 0 with
    its moved copy at place 1, so every token of the copy changed and, on 33c87cf, the verdict said "output
    token 0 of batch 0 depends on input token T-1, a later token" (causal-mask-leaks): a false sentence. One
    more forward, entry 0 at both places, says what it is; the twin cut to the tokens holds every contract."""
    t, _ = _traced("pe-by-batch-place", B, T)
    measured, held, unmeasured = t._measured()
    assert [d.kind for d in measured] == ["batch-place-matters"]
    assert measured[0].message == (
        f"measured on the values: one sequence run at batch places 0 and 1 gives two outputs (output token 0 "
        f"differs, {T} in all): what an entry gets depends on its place in the batch, as where a table is cut or "
        "indexed by the batch's length or an entry's index.")
    assert held == [BATCH, HEADS]   # (the heads are moved and read within each entry: its place alike)
    assert "each token depends on itself, the causal mask holds (a sequence's output depends on its place in the " \
        "batch)" in unmeasured
    assert t.report().verdict.mark == "✗"
    twin, _ = _traced("pe-by-token", B, T)
    assert [d.kind for d in twin.report().diagnostics if d.severity != "note"] == []
    assert twin.report().contracts == [BATCH, OWN_TOKEN, CAUSAL, HEADS]


def test_nothing_is_measured_without_asking_or_without_names():
    torch.manual_seed(0)
    model, x = CausalSelfAttention(bug="mask-transposed"), torch.randn(2, 5, 32)
    with shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:   # not asked: the Python API never reruns a model
        shapetrace.name(x, "B T D")
        model(x)
    assert t.report().contracts == [] and "causal-mask-leaks" not in {d.kind for d in t.diagnostics}
    with shapetrace.trace() as t:   # asked, but no axis is named: the heads alone, found from the structure
        t.check_dependencies()
        model(x)
    assert t.report().contracts == [HEADS] and "causal-mask-leaks" not in {d.kind for d in t.diagnostics}


def test_equal_sizes_found_from_sizes_alone_are_not_measured():
    """B = T = 4 named from --dims sizes alone: which axis is the batch is not proven, so nothing is
    measured (a guess could call a correct model's tokens batch entries)."""
    torch.manual_seed(0)
    model, x = CausalSelfAttention(bug="mask-transposed"), torch.randn(4, 4, 32)
    with shapetrace.trace(dims="B=4 T=4 D=32 H=4") as t:
        t.check_dependencies()
        model(x)
    # the token contracts need the batch and token axes; the heads are found from the structure, not sizes
    assert t.report().contracts == [HEADS] and "causal-mask-leaks" not in {d.kind for d in t.diagnostics}


def test_the_measuring_run_warns_nothing():
    """The traced output needs gradients (the model was traced outside no_grad): reading it must not
    make torch warn in the middle of a user's output."""
    import warnings

    torch.manual_seed(0)
    model, x = CausalSelfAttention().eval(), torch.randn(2, 5, 32)   # (eval: the traced output is reused)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with shapetrace.trace(dims="B=2 T=5 D=32 H=4") as t:
            t.check_dependencies()
            shapetrace.name(x, "B T D")
            model(x)
        assert t.contracts == [BATCH, OWN_TOKEN, CAUSAL, HEADS]


def test_an_encoder_decoders_source_is_not_compared_token_by_token_with_its_target():
    """``nn.Transformer(src, tgt)`` (tests/corpus/public12/torch_transformer.py): the perturbed input is the first,
    the source of S frames, and the output holds the target's T tokens. On 1123aec (main before round 12)
    ``shapetrace trace`` compared them position by position and said ``✗ causal-mask-leaks`` ("output token 0 of
    batch 0 depends on input token 5") on correct code; now the token contracts are not measured, and why."""
    from tests.corpus.public12 import torch_transformer

    model, inputs = torch_transformer.build("")
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=10 D=64 H=4", dependencies=True) as t:
        model(*inputs)
    assert [d.kind for d in t.diagnostics if d.severity in ("error", "warning")] == []
    assert t.report().verdict.line.endswith(
        "held on the values: batch entries stay apart; not measured: heads (the measuring run did not reach the "
        "merge), each token depends on itself, the causal mask holds (the input's tokens (S) are another sequence "
        "than the output's (T))")


class WindowedAttention(nn.Module):
    """Local attention whose window is built in ``forward`` with ``tril``/``triu``, as lucidrains'
    local-attention builds its band (``LocalAttention(look_backward=1, look_forward=1)``) and streaming
    speech encoders give each frame a few frames of right context (torchaudio's Emformer). ``ahead``: keys a
    query may see after its own (1: one frame of look-ahead, by design); ``behind``: a band's width back
    (None: everything before)."""

    def __init__(self, ahead=0, behind=None, n_embd=32, n_head=4):
        super().__init__()
        self.qkv, self.out = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.ahead, self.behind, self.n_head = ahead, behind, n_head

    def forward(self, x):
        B, T, C = x.shape                                                          # (B, T, C)
        q, k, v = self.qkv(x).chunk(3, dim=-1)                                     # (B, T, C) each
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hs)
        keep = torch.ones(T, T, dtype=torch.bool).tril(self.ahead)                 # (T, T)
        if self.behind is not None:
            keep = keep.triu(-self.behind)                                         # (T, T)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.n_head)              # (B, H, T, T)
        att = att.masked_fill(~keep, float("-inf")).softmax(dim=-1)                # (B, H, T, T)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)                             # (B, T, C)
        return self.out(y)


def _windowed(ahead, behind, B=2, T=6):
    torch.manual_seed(0)
    model, x = WindowedAttention(ahead, behind), torch.randn(B, T, 32)
    with shapetrace.trace(dims=f"B={B} T={T} D=32 H=4", dependencies=True) as t:
        shapetrace.name(x, "B T D")
        model(x)
    return t


@pytest.mark.parametrize(("ahead", "behind"), [(1, None), (2, 2), (1, 1)])
def test_a_window_that_looks_ahead_by_design_declares_no_causal_mask(ahead, behind):
    """A ``tril(1)`` (a frame of right context) or a band ``tril(w).triu(-w)`` is no causal mask: its later
    keys are seen on purpose, and the values measured must not call them a leak. On 33c87cf any ``tril`` or
    ``triu`` declared a causal mask, and these correct files ended ``✗`` with causal-mask-leaks."""
    t = _windowed(ahead, behind)
    report = t.report()
    assert "causal-mask-leaks" not in [d.kind for d in report.diagnostics]
    assert CAUSAL not in report.contracts and [BATCH, OWN_TOKEN] == report.contracts[:2]
    assert report.verdict.mark != "✗"


@pytest.mark.parametrize("behind", [None, 2])
def test_a_causal_tril_and_a_causal_window_still_declare_the_mask(behind):
    """``tril()`` (and a causal window ``tril().triu(-w)``, mistral's sliding window) still declares it: the
    causal contract is measured and holds. The window's width (3 keys) is held by no module, so since the commit
    after b2f62da the window is ``?`` (a window-width-unchecked note: engine/rules/directions.window_widths)."""
    report = _windowed(0, behind).report()
    assert [d.kind for d in report.diagnostics if d.severity != "note"] == []
    assert [d.kind for d in report.diagnostics] == ([] if behind is None else ["window-width-unchecked"])
    assert CAUSAL in report.contracts and report.verdict.mark == ("✓" if behind is None else "?")


def test_a_beam_reorder_by_a_computed_index_is_not_measured_as_batch_mixing():
    """A beam search step (PaddlePaddle/PaddleNLP issue #6672's loop, tests/corpus/reports3/chatglm_beam_reorder.py):
    the cache is reordered along the batch by ``beam_idx``, ranked from every entry's scores, so each entry's
    output depends on the others by design. Once 96f365c named that file's step, its correct twin was ``✗
    batch-entries-mix`` under the contracts (a false error); the contracts are now not measured, and say why."""
    from tests.corpus.reports3 import chatglm_beam_reorder

    model, inputs = chatglm_beam_reorder.build("")
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        t.check_dependencies()
        model(*inputs)
    report = t.report()
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    assert BATCH not in report.contracts
    assert "the code reorders its batch entries by an index, B[beam_idx] at index_select #17, so each entry's " \
           "output may depend on the others by design" in report.verdict.line
    assert report.verdict.mark == "✓"


def _leaks(bug):
    from tests.corpus.reports8 import tinyllm_prefill_causal as module
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4", dependencies=True) as t:
        model, inputs = module.build(bug)          # built in the trace, as the CLI runs a file: tril #0 is seen
        model(*inputs)
    return [d.message for d in t.diagnostics if d.kind == "causal-mask-leaks"]


def test_an_output_that_runs_on_past_the_inputs_tokens_is_read_at_the_inputs_last_token():
    """A prefill's outputs joined with a decoding step's (``[B, T+1, D]``): the input's last token is output token
    T - 1, not the step's T. Fails on 9203fd5: reports8 tinyllm_prefill_causal's correct file was ``✗
    causal-mask-leaks`` ("output token 5 depends on input token 6": its own token, misnumbered)."""
    assert _leaks("") == []
    [message] = _leaks("mask-only-without-cache")
    assert message.startswith("measured on the values: output token 0 of batch 0 depends on input token 5, a later "
                              "token, though the code declares a causal mask")


class BidirectionalCausal(nn.Module):
    """A bidirectional wrapper (keras' ``Bidirectional``, tensorflow issue #39635, tests/corpus/reports18/
    tf_time_major_reverse.py) around two causal attentions: the backward one reads the tokens reversed and
    its output is reversed back (``flip(1)``), or, the bug, reversed along the batch (``flip(0)``)."""

    def __init__(self, bug=None):
        super().__init__()
        self.forward_layer, self.backward_layer, self.bug = CausalSelfAttention(), CausalSelfAttention(), bug

    def forward(self, x):                                                          # (B, T, C)
        y_rev = self.backward_layer(x.flip(1))                                     # (B, T, C), tokens reversed
        return self.forward_layer(x) + y_rev.flip(0 if self.bug else 1)            # (B, T, C)


@pytest.mark.parametrize(("B", "T"), SIZES[:1])
def test_a_causal_mask_on_reversed_tokens_declares_no_causal_order(B, T):
    """The backward half of a bidirectional layer runs its causal mask on the tokens read from the end: the
    output sees later tokens by design, and the causal contract is not the model's. On f389eb2 the correct
    wrapper ended ``✗`` with causal-mask-leaks ("output token 0 of batch 0 depends on input token 5"); the
    other contracts are still measured, and the bug (the backward output reversed along the batch) stays ✗."""
    torch.manual_seed(0)
    x = torch.randn(B, T, 32)
    reports = {}
    for bug in (None, "flip-batch"):
        with torch.no_grad(), shapetrace.trace(dims=f"B={B} T={T} D=32 H=4", dependencies=True) as t:
            shapetrace.name(x, "B T D")
            BidirectionalCausal(bug).eval()(x)
        reports[bug] = t.report()
    correct = reports[None]
    assert [d.kind for d in correct.diagnostics if d.severity != "note"] == []
    assert correct.contracts[:2] == [BATCH, OWN_TOKEN] and CAUSAL not in correct.contracts
    assert correct.verdict.mark == "✓"
    assert [d.kind for d in reports["flip-batch"].diagnostics if d.severity == "error"][:1] == ["roll-not-undone"]
    assert reports["flip-batch"].verdict.mark == "✗"
