"""The engine on code it did not write: provenance, roles, sentences and tracer state.

Each bug class at several sizes (equal sizes included); each sentence fix pinned by its exact words.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import shapetrace
from shapetrace.engine.sentences import annotate
from shapetrace.errors import UsageError

SIZES = [(2, 8, 8, 8), (2, 6, 8, 64), (3, 5, 4, 16), (2, 4, 4, 4)]   # (B, T, H, d_k): T = H, T = d_k...


def kinds(trace, severities=("error", "warning")) -> list[str]:
    return [d.kind for d in trace.diagnostics if d.severity in severities]


def traced(fn, B, T, H, dk, **extra):
    dims = {"B": B, "T": T, "D": H * dk, "H": H, **extra}
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        fn(torch.randn(B, T, H * dk), B, T, H, dk)
    return t


class Attention(nn.Module):
    """Separate projections (q_proj, k_proj, v_proj): the roles come from the modules."""

    def __init__(self, D, H, swap=False, scale_by_D=False):
        super().__init__()
        self.H, self.swap, self.scale_by_D = H, swap, scale_by_D
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = (p(x).view(B, T, self.H, D // self.H).transpose(1, 2) for p in (self.q_proj, self.k_proj,
                                                                                   self.v_proj))  # (B, H, T, d_k)
        scores = k @ q.transpose(-2, -1) if self.swap else q @ k.transpose(-2, -1)               # (B, H, T, T)
        scores = scores / math.sqrt(D if self.scale_by_D else D // self.H)
        y = scores.softmax(-1) @ v                                                               # (B, H, T, d_k)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, D))                                   # (B, T, D)


@pytest.mark.parametrize("B, T, H, dk", SIZES)
def test_correct_attention_with_projection_modules_is_clean(B, T, H, dk):
    t = traced(lambda x, *_: Attention(H * dk, H)(x), B, T, H, dk)
    assert kinds(t) == []
    matmuls = [e for e in t.events if e.op == "matmul"]
    assert [e.projections for e in matmuls] == [("q", "k"), (None, "v")]
    assert matmuls[0].output.dims == ("B", "H", "T", "T")
    assert [e.module for e in t.events if e.op == "linear"] == ["q_proj", "k_proj", "v_proj", "o_proj"]


@pytest.mark.parametrize("B, T, H, dk", SIZES)
def test_keys_times_queries_is_caught_from_provenance(B, T, H, dk):
    t = traced(lambda x, *_: Attention(H * dk, H, swap=True)(x), B, T, H, dk)
    assert kinds(t) == ["query-key-swapped"]
    scores = next(e for e in t.events if e.op == "matmul")
    assert annotate(scores).startswith("scores with keys and queries swapped")


@pytest.mark.parametrize("B, T, H, dk", [(2, 8, 8, 8), (2, 6, 8, 64), (3, 5, 4, 16)])
def test_scaling_by_the_model_width_is_a_warning(B, T, H, dk):
    t = traced(lambda x, *_: Attention(H * dk, H, scale_by_D=True)(x), B, T, H, dk)
    assert [(d.severity, d.kind) for d in t.diagnostics if d.severity != "note"] == [
        ("warning", "scale-not-head-dim")]


def over_heads(x, B, T, H, dk):
    q = x.view(B * T, H, dk)                                   # (B*T, H, d_k): tokens stay in the batch
    return (q @ q.transpose(-2, -1)).softmax(-1) @ q           # (B*T, H, H): attention over heads


def seq_first_fed_batch_first(x, B, T, H, dk):
    T_, B_, _ = x.shape                                         # written for [T, B, D], fed [B, T, D]
    q = x.view(T_, B_ * H, dk).transpose(0, 1)                  # (T*H, B, d_k): really
    return torch.bmm(torch.bmm(q, q.transpose(1, 2)).softmax(-1), q)


def mask_tiled_in_the_wrong_order(x, B, T, H, dk):
    q = x.view(B, T, H, dk).transpose(1, 2).reshape(B * H, T, dk)    # (B*H, T, d_k), Bloom style
    scores = torch.bmm(q, q.transpose(1, 2))                         # (B*H, T, T)
    pad = torch.zeros(B, T, T, dtype=torch.bool)
    pad[-1, :, -1] = True
    return scores.masked_fill(pad.repeat(H, 1, 1), -1e9).softmax(-1)   # (H*B, T, T) mask: wrong order


def mask_tiled_right(x, B, T, H, dk):
    q = x.view(B, T, H, dk).transpose(1, 2).reshape(B * H, T, dk)
    scores = torch.bmm(q, q.transpose(1, 2))
    pad = torch.zeros(B, T, T, dtype=torch.bool)
    pad[-1, :, -1] = True
    return scores.masked_fill(pad.repeat_interleave(H, dim=0), -1e9).softmax(-1)


def padding_on_queries(fill):
    def fn(x, B, T, H, dk):
        q = x.view(B, T, H, dk).transpose(1, 2)                      # (B, H, T, d_k)
        scores = q @ q.transpose(-2, -1)                             # (B, H, T, T)
        pad = torch.zeros(B, T, dtype=torch.bool)
        pad[-1, -1] = True
        value = torch.finfo(scores.dtype).min if fill == "finfo" else fill
        return scores.masked_fill(pad[:, None, :, None], value).softmax(-1)   # on the queries: wrong
    return fn


def additive_mask(on_keys):
    def fn(x, B, T, H, dk):
        q = x.view(B, T, H, dk).transpose(1, 2)
        scores = q @ q.transpose(-2, -1)
        pad = torch.zeros(B, T)
        pad[-1, -1] = -10000.0
        mask = pad[:, None, None, :] if on_keys else pad[:, None, :, None]
        return (scores + mask).softmax(-1)
    return fn


@pytest.mark.parametrize("B, T, H, dk", SIZES)
@pytest.mark.parametrize("fn, expected", [
    (over_heads, ["attends-over-heads"]),
    (mask_tiled_in_the_wrong_order, ["mask-wrong-batch-order"]),
    (mask_tiled_right, []),
    (padding_on_queries(-1e9), ["mask-wrong-axis"]),
    (padding_on_queries(-10000.0), ["mask-wrong-axis"]),
    (padding_on_queries("finfo"), ["mask-wrong-axis"]),
    (padding_on_queries(float("-inf")), ["mask-wrong-axis", "nan-rows"]),   # -inf rows come out NaN too
    (additive_mask(on_keys=False), ["mask-wrong-axis"]),
    (additive_mask(on_keys=True), []),
])
def test_bug_classes_on_roles(fn, expected, B, T, H, dk):
    assert kinds(traced(fn, B, T, H, dk), ("error",)) == expected


@pytest.mark.parametrize("B, T, H, dk", [(2, 6, 8, 8), (3, 5, 4, 16), (2, 4, 2, 8)])
def test_seq_first_code_fed_batch_first_attends_over_the_batch(B, T, H, dk):
    assert "attends-over-batch" in kinds(traced(seq_first_fed_batch_first, B, T, H, dk), ("error",))


# -- names never contradict sizes ------------------------------------------------------------

def test_repeats_are_copies_not_batch():
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32") as t:
        x.repeat(1, 2, 1)                                      # (B, 2·T, D)
        x.repeat_interleave(2, dim=1)                          # (B, T·2, D)
        x[:, [0, 2]]                                           # (B, 2, D): tokens 0 and 2 (lib14: was unnamed)
    assert [e.output.dims for e in t.events] == [("B", "2*T", "D"), ("B", "T*2", "D"), ("B", "T[0,2]", "D")]


def test_every_name_fits_its_declared_size_on_many_ops():
    x = torch.randn(2, 6, 64)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        y = x.view(2, 6, 4, 16).transpose(1, 2)
        for out in (y.flip(2), y.roll(1, 2), y.sum(-1), y.mean(1, keepdim=True), torch.nn.functional.pad(y, (0, 2)),
                    y.index_select(2, torch.tensor([0, 1])), torch.where(y > 0, y, 0.0), y.adjoint(),
                    y.broadcast_to(2, 4, 6, 16), y.narrow(3, 0, 8), y.unbind(1)[0], y.chunk(2, dim=3)[1]):
            del out
    sizes = {"B": 2, "T": 6, "D": 64, "H": 4, "d_k": 16}
    for e in t.events:
        for info in e.outputs:
            for name, size in zip(info.dims, info.shape):
                assert name is None or name not in sizes or sizes[name] == size, (e.op, info.dims, info.shape)
    assert t.name_mismatches == 0


def test_cross_attention_second_sequence_is_S_even_when_lengths_match():
    x, memory = torch.randn(2, 6, 32), torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 S=6 D=32 H=4") as t:
        q = x.view(2, 6, 4, 8).transpose(1, 2)                  # (B, H, T, d_k)
        k = memory.view(2, 6, 4, 8).transpose(1, 2)             # (B, H, S, d_k)
        q @ k.transpose(-2, -1)                                  # (B, H, T, S)
    assert t.events[-1].output.dims == ("B", "H", "T", "S")
    assert [a.role for a in t.events[-1].output.axes] == [None, None, "query", "key"]


def test_user_spellings_of_dims_are_roles():
    x = torch.randn(2, 8, 64)
    with shapetrace.trace(dims="batch=2,seq=8,d_model=64,heads=8") as t:
        q = x.view(2, 8, 8, 8).transpose(1, 2)                   # (B, H, T, d_k)
        q @ q.transpose(-2, -1)                                  # (B, H, T, T)
    assert t.events[1].output.dims == ("B", "H", "T", "d_k") and kinds(t) == []
    with shapetrace.trace(dims="batch=2,seq=8,d_model=64,heads=8") as bad:
        q = x.view(2, 8, 8, 8)                                   # view(B, H, T, d_k) without a transpose, T = H
        (q @ q.transpose(-2, -1)).softmax(-1) @ q
    assert bad.events[0].output.dims == ("B", "T", "H", "d_k")   # what memory holds, whatever was meant
    assert kinds(bad) == ["attends-over-wrong-axis"]


def test_narrow_heads_and_fused_widths_named_by_structure():
    lin_inner, lin_kv = nn.Linear(64, 4 * 8), nn.Linear(64, 128)
    x = torch.randn(2, 6, 64)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=64 H=4 d_k=8") as t:
        lin_inner(x).view(2, 6, 4, 8)                            # T5: H·d_kv = 32 ≠ D
        lin_kv(x).chunk(2, dim=-1)                               # a fused k/v projection: 2·D
    dims = [e.output.dims for e in t.events]
    assert dims == [("B", "T", "H*d_k"), ("B", "T", "H", "d_k"), ("B", "T", "2*D"), ("B", "T", "D")]


def test_per_head_interleaved_qkv_is_named_without_a_false_note():
    x = torch.randn(2, 6, 3 * 64)
    with shapetrace.trace(dims="B=2 T=6 D=64 H=4") as t:
        shapetrace.name(x, "B T 3*D")
        neox = x.view(2, 6, 4, 3 * 16)                           # GPT-NeoX: (B, T, H, 3·d_k)
        bloom = x.view(2, 6, 4, 3, 16)                           # Bloom: (B, T, H, 3, d_k)
        neox.split(16, dim=-1)
        bloom[..., 0, :]
    assert [e.output.dims for e in t.events] == [
        ("B", "T", "H", "3*d_k"), ("B", "T", "H", "qkv", "d_k"), ("B", "T", "H", "d_k"), ("B", "T", "H", "d_k")]
    assert t.diagnostics == []


# -- sentences ------------------------------------------------------------------------------------

def test_sentences_name_both_axes_and_never_claim_a_missing_name():
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6") as t:                  # D is not declared: axis 2 has no name
        shapetrace.name(x, "B T _")
        x.transpose(1, 2)
        s = torch.randn(2, 6, 6)
        s.softmax(dim=-2)
    # the unnamed axis is told where it was in the input (axis 2, of size 32), where T was axis 1
    assert annotate(t.events[0]).startswith("swaps T and axis 2 (size 32); a view")
    assert annotate(t.events[1]) == "normalises over T: the weights along T sum to 1; new 288 B"


def test_dropout_is_said_for_what_it_is():
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32") as t:
        torch.nn.functional.dropout(x, p=0.1, training=True)
        torch.nn.functional.dropout(x, p=0.1, training=False)
    assert annotate(t.events[0]).startswith("dropout on activations: zeroes random values (p = 0.1)")
    assert annotate(t.events[1]) == "does nothing here (eval mode): returns its input itself, no new buffer"
    assert t.events[1].noop and t.events[1].alloc_bytes == 0


# -- tracer state -------------------------------------------------------------------------------------

class UserMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_leaving_removes_exactly_its_own_recorder():
    user = UserMode()
    with shapetrace.trace() as t:
        user.__enter__()                      # the traced code leaves its own mode entered
        torch.zeros(2, 3).view(3, 2)
    stack = torch.overrides._get_current_function_mode_stack()
    assert stack == [user]                   # the user's mode stays; the recorder is gone
    user.__exit__(None, None, None)
    n = len(t.events)
    torch.zeros(2, 3).view(3, 2)
    assert len(t.events) == n and torch.overrides._get_current_function_mode_stack() == []


def test_reentering_an_active_trace_is_refused_and_out_of_order_exit_stops_recording():
    a, b = shapetrace.trace(), shapetrace.trace()
    a.__enter__()
    with pytest.raises(UsageError, match="already recording"):
        a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)             # exited out of order
    torch.zeros(4).view(2, 2)
    b.__exit__(None, None, None)
    torch.zeros(4).view(2, 2)
    assert len(a.events) == 0 and len(b.events) == 1
    assert torch.overrides._get_current_function_mode_stack() == []


def test_nan_rows_of_any_traced_softmax_are_found():
    with shapetrace.trace(dims="B=1 T=3") as t:
        s = torch.zeros(1, 2, 3, 3)
        s[0, 1, 2] = float("-inf")
        s.softmax(-1)
    assert t.nan_rows == [(0, 1, 2)] and "nan-rows" in kinds(t, ("error",))


@pytest.mark.parametrize("raised", ["class Odd(BaseException):\n    pass\nraise Odd('stop here')",
                                    "raise GeneratorExit()", "raise SystemExit(3)"])
def test_any_exception_class_from_a_traced_script_gets_the_clean_failure(tmp_path, raised):
    # in this process (no interpreter start, no torch import per case): an exception the command let
    # through would end this test too (a BaseException subclass is caught by no `except Exception`), and a
    # SystemExit let through would come back as exit code 3
    from conftest import cli_in_process

    script = tmp_path / "fails.py"
    script.write_text("import torch\nx = torch.zeros(2, 6, 512).view(2, 6, 8, 64)\n" + raised + "\n")
    out = cli_in_process("trace", str(script), "--dims", "B=2,T=6,D=512,H=8")
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    said = "✗ the script exited with code 3" if "SystemExit" in raised else "✗ the script raised"
    assert said in out.stdout and "[B=2, T=6, H=8, d_k=64]" in out.stdout


def test_einops_pattern_names_name_what_provenance_left_unnamed():
    """A rearrange's output names an unnamed axis where the pattern's name is a declared one of the
    same size (h -> H); a name it cannot match to a declared size (d, b, n here) stays unnamed."""
    from einops import rearrange

    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="H=4 d_k=8") as t:
        q = rearrange(x, "b n (h d) -> b h n d", h=4)             # (b, H, n, d)
        q.transpose(-2, -1)                                        # reads the named output
    assert [e.output.dims for e in t.events] == [(None, None, None, None), (None, "H", None, None),
                                                  (None, "H", None, None)]
