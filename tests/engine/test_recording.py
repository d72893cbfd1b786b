"""How the tracer records (issue 14): what it reads at call time, what it leaves for first read, and
the name memo that answers a repeated call (the next layer) without running its name rule again.

Every check here is against torch itself or against the same trace made without the shortcut."""

from __future__ import annotations

import gc
import weakref

import torch
import torch.nn.functional as F

import shapetrace
from shapetrace.engine import tracer as tr
from shapetrace.engine.capture import OpRecord
from shapetrace.engine.events import Event, TensorInfo
from shapetrace.engine.infer import names as names_pass
from shapetrace.engine.infer import record as record_pass

DIMS = "B=2 T=6 D=32 H=4"


def _attention(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    B, T, D = x.shape
    q = F.linear(x, w).view(B, T, 4, D // 4).transpose(1, 2)       # (B, H, T, d_k)
    scores = q @ q.transpose(-2, -1)                                 # (B, H, T, T)
    return scores.softmax(dim=-1)


def _trace(fn, *args):
    with shapetrace.trace(dims=DIMS) as t:
        fn(*args)
    return t


def test_events_are_dataclasses_made_on_first_read_with_the_same_facts():
    x, w = torch.randn(2, 6, 32), torch.nn.Parameter(torch.randn(32, 32))
    t = _trace(_attention, x, w)
    assert all(type(r) is OpRecord for r in t.capture.records)   # raw facts while recording
    assert t._inference.events == []                              # nothing inferred yet
    assert len(t) == 6
    events = t.events
    assert all(isinstance(e, Event) for e in events) and len(t._inference.events) == 6
    view = events[1]
    assert (view.op, view.args, view.output.dims) == ("view", "2, 6, 4, 8", ("B", "T", "H", "d_k"))
    assert view.output == TensorInfo((2, 6, 4, 8), (192, 32, 8, 1), 0, "float32", True, ("B", "T", "H", "d_k"),
                                     "cpu", 2 * 6 * 32 * 4)
    assert view.source == "tests/engine/test_recording.py:26" and view.function == "_attention"
    assert view.code == "q = F.linear(x, w).view(B, T, 4, D // 4).transpose(1, 2)       # (B, H, T, d_k)"
    assert view.stack[:2] == ("_attention", "_trace")
    assert events[3].args == "-2, -1" and events[4].args == "tensor[2, 4, 8, 6]"
    assert events[0].args == "tensor[2, 6, 32], tensor[32, 32]"
    assert events is t.events   # made once


def test_a_tensor_argument_is_not_kept_alive_by_the_trace():
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims=DIMS) as t:
        other = torch.randn(2, 6, 32)
        gone = weakref.ref(other)
        torch.cat([x, other], dim=1)
        del other
    gc.collect()
    assert gone() is None
    assert t.events[0].args == "[tensor[2, 6, 32], tensor[2, 6, 32]], dim=1"


def test_labels_are_made_from_the_axes_when_first_read():
    x = torch.randn(2, 6, 32)
    t = _trace(lambda a: a.view(2, 6, 4, 8), x)
    info = t.events[0].output
    assert info.__dict__.get("_dims") is None       # not labelled yet
    assert info.dims == ("B", "T", "H", "d_k")
    assert info.__dict__["_dims"] == ("B", "T", "H", "d_k")


def test_metadata_is_read_at_call_time_not_when_the_event_is_made():
    """An in-place op that changes a tensor's layout after it was recorded changes nothing recorded."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims=DIMS) as t:
        y = x.view(2, 6, 4, 8)
        y.transpose_(1, 2)                       # y itself now has another shape and strides
    first = t.events[0].output
    assert (first.shape, first.stride) == ((2, 6, 4, 8), (192, 32, 8, 1))


def _layers(x, weights):
    for w in weights:
        x = x + _attention(x, w).mean(dim=1).sum(dim=-1, keepdim=True)
    return x


def _without_memo(fn, *args):
    original = names_pass.names_of

    def fresh(state, *a, **k):
        state.name_memo.clear()
        return original(state, *a, **k)

    # the name pass is called from the record's steps and from the calls without a row
    names_pass.names_of = record_pass.names_of = fresh
    try:
        t = _trace(fn, *args)
        assert t.events is not None   # inference runs on first read: keep the patch until then
        return t
    finally:
        names_pass.names_of = record_pass.names_of = original


def _facts(t):
    return [(e.op, e.args, [i.dims for i in e.inputs], [o.dims for o in e.outputs], e.view, e.copy_bytes)
            for e in t.events]


def test_the_name_memo_changes_no_name():
    x = torch.randn(2, 6, 32)
    weights = [torch.nn.Parameter(torch.randn(32, 32)) for _ in range(3)]
    remembered, fresh = _trace(_layers, x, weights), _without_memo(_layers, x, weights)
    assert _facts(remembered) == _facts(fresh)
    assert remembered.events
    assert len(remembered._inference.name_memo) < len(remembered)   # layers 1 and 2 were answered from layer 0
    assert remembered.name_mismatches == fresh.name_mismatches == 0


def test_the_memo_keys_tensor_arguments_by_kind():
    """A parameter weight is structure; a computed weight is not: the same shapes, different names."""
    x = torch.randn(2, 6, 32)
    param, computed = torch.nn.Parameter(torch.randn(32, 32)), torch.randn(32, 32)
    with shapetrace.trace(dims=DIMS) as t:
        F.linear(x, param)
        F.linear(x, computed)
    assert [e.output.dims for e in t.events] == [("B", "T", "D"), ("B", "T", None)]
    fresh = _without_memo(lambda: (F.linear(x, param), F.linear(x, computed)))
    assert _facts(t) == _facts(fresh)


def test_freeze_keeps_what_name_rules_read_and_shows_lists_and_slices():
    x = torch.zeros(2, 3)
    frozen, kwargs = tr.freeze_args((x, [1, 2], (3, slice(0, 2)), None), {"dim": -1})
    assert hash((frozen, kwargs)) is not None
    assert frozen[0] == (torch.Size([2, 3]), torch.float32, False, torch.Tensor)
    from shapetrace.engine.events import format_args
    assert format_args("op", frozen, kwargs) == "[1, 2], (3, 0:2), None, dim=-1"


def test_a_projection_sentence_names_a_width_only_when_it_has_a_name():
    from shapetrace.engine.sentences import annotate

    x = torch.randn(1, 4, 32)
    with shapetrace.trace(dims="B=1 T=4 D=32 H=4") as t:
        F.linear(x, torch.nn.Parameter(torch.randn(48, 32)))
        F.linear(x, torch.nn.Parameter(torch.randn(32, 32)))
    assert [annotate(e) for e in t.events] == [
        "projects each token's 32 features to 48 with a 48×32 weight; new buffer 768 B",
        "projects each token's 32 features to 32 (D) with a 32×32 weight; new buffer 512 B"]


# -- call sites through module calls: the frames above a running module are walked once ---------------

def _helper_op(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(0, 1)                                         # (T, B, D)


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, x):
        y = self.proj(x)                                             # (B, T, D)
        return _helper_op(y)


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    def forward(self, x):
        return self.inner(x).contiguous()                            # (T, B, D)


def _run_outer(model, x):
    return model(x)


def test_call_sites_in_nested_modules_and_helpers_name_every_user_function():
    model, x = _Outer(), torch.randn(2, 6, 32)
    with shapetrace.trace(dims=DIMS) as t:
        _run_outer(model, x)
    linear, transpose, contiguous = t.events
    here = "test_call_sites_in_nested_modules_and_helpers_name_every_user_function"
    # nn.Linear's own forward is torch's: the site is the line that called the module
    assert (linear.op, linear.module, linear.function) == ("linear", "inner.proj", "_Inner.forward")
    assert linear.stack[:4] == ("_Inner.forward", "_Outer.forward", "_run_outer", here)   # then pytest's
    assert linear.code == "y = self.proj(x)                                             # (B, T, D)"
    assert (transpose.module, transpose.stack[:5]) == ("inner", ("_helper_op", "_Inner.forward", "_Outer.forward",
                                                                 "_run_outer", here))
    assert transpose.code.startswith("return x.transpose(0, 1)")
    assert (contiguous.module, contiguous.stack[:3]) == ("", ("_Outer.forward", "_run_outer", here))


def test_the_same_helper_called_from_two_modules_gets_each_callers_stack():
    class A(torch.nn.Module):
        def forward(self, x):
            return _helper_op(x)

    class B(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = A()

        def forward(self, x):
            return _helper_op(self.a(x))

    with shapetrace.trace(dims=DIMS) as t:
        B()(torch.randn(2, 6, 32))
    first, second = t.events
    assert first.stack[:3] == ("_helper_op", "test_the_same_helper_called_from_two_modules_gets_each_callers_stack."
                               "<locals>.A.forward", "test_the_same_helper_called_from_two_modules_gets_each_callers_"
                               "stack.<locals>.B.forward")
    assert second.stack[:2] == ("_helper_op", "test_the_same_helper_called_from_two_modules_gets_each_callers_stack."
                                "<locals>.B.forward")
    assert (first.module, second.module) == ("a", "")


def test_module_calls_keep_no_frame_or_activation_alive():
    kept = []

    class Makes(torch.nn.Module):
        def forward(self, x):
            inside = x * 2
            kept.append(weakref.ref(inside))
            return x.view(12, 32)                                    # (B·T, D)

    was_enabled = gc.isenabled()
    gc.disable()   # freed by reference counting alone: no cycle through a frame
    try:
        with shapetrace.trace(dims=DIMS):
            Makes()(torch.randn(2, 6, 32))
        assert kept[0]() is None
    finally:
        if was_enabled:
            gc.enable()


def test_a_trace_leaves_what_is_frozen_alone():
    before = gc.get_freeze_count()   # 0, unless a test before this one in the worker froze (a CLI in process)
    with shapetrace.trace(dims=DIMS):
        assert gc.get_freeze_count() <= before   # nothing set aside: the old generations wait instead
        torch.randn(2, 6, 32).view(12, 32)
    assert gc.get_freeze_count() <= before
    gc.freeze()   # a process that froze its own objects keeps them frozen, and the trace adds none
    try:
        frozen = gc.get_freeze_count()
        with shapetrace.trace(dims=DIMS) as t:
            torch.randn(2, 6, 32).view(12, 32)
        t.report()
        # none added, none unfrozen; a few may be freed (earlier tests' frozen garbage the trace lets go of:
        # 608,956 -> 608,954 once, in a worker that had run other tests)
        assert frozen * 0.99 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_a_trace_never_asks_what_is_frozen(monkeypatch):
    """``gc.get_freeze_count`` walks every frozen object: in a process that froze its objects (the CLI
    does) it cost ~20 ms of CPU per trace; recording and analysis never ask it, nor freeze."""
    def walks(*_):
        raise AssertionError("walked every frozen object")

    monkeypatch.setattr(gc, "get_freeze_count", walks)
    monkeypatch.setattr(gc, "freeze", walks)
    monkeypatch.setattr(gc, "unfreeze", walks)
    t = _trace(_attention, torch.randn(2, 6, 32), torch.nn.Parameter(torch.randn(32, 32)))
    assert [e.op for e in t.report().events] == ["linear", "view", "transpose", "transpose", "matmul", "softmax"]


def test_the_older_generations_wait_while_a_trace_is_analysed_and_only_then(monkeypatch):
    before = gc.get_threshold()
    seen = []
    settle = shapetrace.engine.settle   # (the passes after the run, imported by the tracer)
    note_final = settle.note_final

    def noting(inference, capture):   # (a pass after the run: what the collector is told while it runs)
        seen.append(gc.get_threshold())
        return note_final(inference, capture)

    monkeypatch.setattr(settle, "note_final", noting)   # (the passes after the run: engine/settle.py)
    t = _trace(_attention, torch.randn(2, 6, 32), torch.nn.Parameter(torch.randn(32, 32)))
    assert gc.get_threshold() == before
    assert len(t.events) == 6
    young, middle, old = seen[0]
    assert (young, middle > 10**8, old > 10**8) == (max(before[0], 20_000), True, True)
    assert gc.get_threshold() == before
    t.report()
    assert gc.get_threshold() == before


def test_the_older_generations_wait_only_while_recording_and_young_cycles_are_still_freed():
    before = gc.get_threshold()
    with shapetrace.trace(dims=DIMS):
        young, middle, old = gc.get_threshold()
        assert (young, middle > 10**8, old > 10**8) == (max(before[0], 20_000), True, True)

        class Cycle:
            pass

        cycle = Cycle()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
        for _ in range(3):
            [[] for _ in range(young + 1)]   # enough new objects for the young generation's collection
            torch.randn(2, 6, 32).view(12, 32)
        assert gone() is None   # a cycle dropped during the run is freed during the run
    assert gc.get_threshold() == before


def test_a_collector_the_traced_code_retuned_keeps_its_setting():
    before = gc.get_threshold()
    try:
        with shapetrace.trace(dims=DIMS):
            gc.set_threshold(500, 5, 5)
        assert gc.get_threshold() == (500, 5, 5)
    finally:
        gc.set_threshold(*before)


def test_the_first_output_with_a_dead_row_is_found_among_clean_ones():
    masked = torch.zeros(1, 2, 4, 4)
    masked[0, 1, 3, :] = float("-inf")                               # query 3 of head 1 sees no key
    with shapetrace.trace(dims="B=1 T=4 H=2 D=8") as t:
        torch.zeros(1, 2, 4, 4).softmax(dim=-1)
        masked.softmax(dim=-1)
        torch.zeros(1, 2, 4, 4).softmax(dim=-1)
    assert (t.nan_rows, t.nan_event) == ([(0, 1, 3)], 1)


def test_no_nan_anywhere_leaves_an_empty_list():
    with shapetrace.trace(dims="B=1 T=4 H=2 D=8") as t:
        torch.zeros(1, 2, 4, 4).softmax(dim=-1)
    assert t.nan_rows == []


def _weights_of_one_head_block(x: torch.Tensor, w: torch.Tensor, held: list) -> torch.Tensor:
    """nanoGPT's ``CausalSelfAttention.forward`` (model.py, the non-flash branch), one projection for q, k
    and v: the weights go out of scope once ``att @ v`` has run (a weak reference to them is kept in ``held``)."""
    B, T, C = x.shape
    q = F.linear(x, w).view(B, T, 4, C // 4).transpose(1, 2)         # (B, nh, T, hs)
    att = (q @ q.transpose(-2, -1)) * (1.0 / (C // 4) ** 0.5)        # (B, nh, T, T)
    att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf"))
    att = F.softmax(att, dim=-1)                                      # (B, nh, T, T)
    held.append(weakref.ref(att))
    return (att @ q).transpose(1, 2).contiguous().view(B, T, C)      # (B, T, C)


def test_attention_weights_without_nan_are_read_at_their_call_not_held_to_the_end():
    """A softmax output on the CPU is screened for NaN rows when it is made (one sum): a clean one is not
    kept, so recording holds no attention weights alive (holding each one until the run ended made every
    later allocation fresh memory); the trace still says the values were read and none was NaN."""
    x, w, held = torch.randn(2, 6, 32), torch.randn(32, 32), []
    with shapetrace.trace(dims=DIMS) as t:
        _weights_of_one_head_block(x, w, held)
        freed_while_recording = held[0]() is None
    assert freed_while_recording
    assert (t.nan_rows, t.nan_event) == ([], None)


def test_the_dependency_check_keeps_every_attention_output_to_the_end():
    """The twin: where the dependency check will read the weights' zero triangle after the run, every
    softmax output is kept until the run ends (as before), and the causal triangle is read from it."""
    x, w, held = torch.randn(2, 6, 32), torch.randn(32, 32), []
    with shapetrace.trace(dims=DIMS) as t:
        t.check_dependencies()
        _weights_of_one_head_block(x, w, held)
        kept_while_recording = held[0]() is not None
    assert kept_while_recording
    assert (t.nan_rows, t._triangle) == ([], "zero above the diagonal")


def test_a_row_left_without_keys_is_kept_and_read_after_the_run():
    """Transformers' padding bug (a query row masked whole: softmax over only -inf is NaN): the output that
    fails the screen at its call is kept, and its rows are read after the run."""
    scores = torch.randn(1, 2, 4, 4)                                  # (B, H, T, T)
    scores[0, 0, 2, :] = float("-inf")                                # query 2 of head 0 sees no key
    with shapetrace.trace(dims="B=1 T=4 H=2 D=8") as t:
        scores.softmax(dim=-1)
    assert (t.nan_rows, t.nan_event) == ([(0, 0, 2)], 0)
    assert t.capture.value_checked == []                              # let go once read


class _Block(torch.nn.Module):
    """nanoGPT's ``Block.forward`` (model.py): ``x = x + self.attn(self.ln_1(x))``, the residual input let go
    once the sum is made (a weak reference to it is kept in ``held``)."""

    def __init__(self, held: list):
        super().__init__()
        self.ln_1, self.attn, self.held = torch.nn.LayerNorm(32), torch.nn.Linear(32, 32), held

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 1.0                                                   # (B, T, C), its own tensor
        self.held.append(weakref.ref(x))
        x = x + self.attn(self.ln_1(x))                               # (B, T, C)
        return x + 0.0


def test_an_addition_keeps_a_copy_of_its_operand_not_the_operand():
    """An addition of two tensors keeps the smaller operand's values for the analysis (it may add a mask onto
    scores): as a copy taken at the call, so the residual stream the block lets go is freed while recording."""
    held: list = []
    with shapetrace.trace(dims=DIMS) as t:
        _Block(held)(torch.randn(2, 6, 32))
        freed_while_recording = held[0]() is None
    assert freed_while_recording
    kept = [r.kept for r in t.capture.records if type(r) is OpRecord and r.spec.name == "add"]
    # the operands tie in size (x + the block's output), so both are kept: which one could be scores is
    # decided by the analysis (tests/corpus/test_added_operands.py)
    assert len(kept) == 1 and [(c.shape, c.requires_grad) for c in kept[0]] == [((2, 6, 32), False)] * 2


def test_a_mask_added_onto_scores_is_read_from_the_copy():
    """The twin: the Annotated Transformer's ``subsequent_mask`` as an additive mask (``-inf`` above the
    diagonal), made inline and gone after the addition, is still read after the run: it hides the future."""
    q = torch.randn(2, 4, 6, 8)                                       # (B, H, T, d_k)
    with shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        shapetrace.name(q, "B H T d_k")
        att = q @ q.transpose(-2, -1)                                 # (B, H, T, T)
        att = att + torch.full((6, 6), float("-inf")).triu(1)         # (B, H, T, T)
        att.softmax(dim=-1)
    added = next(e for e in t.events if e.op == "add")
    assert (added.params, added.output.dims) == ({"hides": True, "hides_side": "future"}, ("B", "H", "T", "T"))


def test_the_capture_goes_with_its_trace():
    """No reference cycle holds a capture (its records, the kept copies) once its trace is dropped: it is
    freed at once, not at the collector's next full pass."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims=DIMS) as t:
        B, T, D = x.shape
        (x + x).view(B, T, 4, D // 4)                                 # (B, T, H, d_k)
    capture = weakref.ref(t.capture)
    del t
    assert capture() is None


def test_a_tensor_a_running_module_holds_is_recorded_as_held():
    """A registered buffer (Swin's ``relative_position_index``, T5's buckets) or a tensor attribute
    (``self.inv_freq = ...`` unregistered, as kv-cache code keeps its tables) entering while its module
    runs is the model's own; the input the module is called with is not, nor is a parameter. Size
    guesses on held tensors never cross an index (:mod:`shapetrace.engine.infer.guesses`)."""

    class Held(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("index", torch.zeros(6, 6, dtype=torch.long))
            self.table, self.weight = torch.ones(6), torch.nn.Parameter(torch.ones(6))

        def forward(self, x):
            return x + self.index + self.table + self.weight   # (B, T, T)

    x = torch.randn(2, 6, 6)
    model = Held()
    t = _trace(model, x)
    assert t.capture.nodes[t.capture.known_node(x)].held is False
    assert t.capture.nodes[t.capture.known_node(model.index)].held is True
    assert t.capture.nodes[t.capture.known_node(model.table)].held is True
    assert t.capture.nodes[t.capture.known_node(model.weight)].held is False
