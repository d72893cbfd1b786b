"""The Python API: doctests, light imports, notebook display, structured results."""

from __future__ import annotations

import dataclasses
import doctest
import io

import pytest
from conftest import render


@pytest.mark.parametrize("module", ["shapetrace", "shapetrace.engine.tracer", "shapetrace.engine.failure",
                                    "shapetrace.engine.dims", "shapetrace.engine.formatting", "shapetrace.app.devices",
                                    "shapetrace.app.layers"])
def test_docstring_examples_run(module):
    import importlib

    mod = importlib.import_module(module)
    result = doctest.testmod(mod, verbose=False, report=True)
    assert result.failed == 0 and result.attempted >= 1


def test_public_api_is_exported():
    import shapetrace

    for name in ("trace", "name", "parse_dims", "Trace", "Event", "TensorInfo", "Diagnostic", "ShapetraceError"):
        assert name in shapetrace.__all__ and getattr(shapetrace, name) is not None
    for cls in (shapetrace.Event, shapetrace.TensorInfo, shapetrace.Diagnostic):
        assert dataclasses.is_dataclass(cls)
    assert shapetrace.__doc__ and shapetrace.trace.__doc__ and ">>>" in shapetrace.Trace.show.__doc__
    assert ">>>" in shapetrace.Trace.to_json.__doc__ and ">>>" in shapetrace.Trace.diagnostics.__doc__


def _sample():
    import torch

    import shapetrace

    with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
        torch.zeros(2, 6, 512).view(2, 6, 8, 64).transpose(1, 2)
    return t


def test_jupyter_display_bundle():
    t = _sample()
    bundle = t._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert "    1 transpose    [B=2, H=8, T=6, d_k=64]         (3072, 64, 512, 1)      view" in bundle["text/plain"]
    assert bundle["text/html"].startswith("<pre") and bundle["text/html"].rstrip().endswith("</pre>")
    assert "transpose" in bundle["text/html"] and "d_k=64" in bundle["text/html"]


def test_notebook_display_bundle():
    """What Jupyter's DisplayFormatter calls: ``_repr_mimebundle_`` gives HTML and plain text."""
    data = _sample()._repr_mimebundle_()
    assert "text/html" in data and "d_k=64" in data["text/html"]
    assert "    1 transpose    [B=2, H=8, T=6, d_k=64]" in data["text/plain"]


def test_rich_renders_a_trace_directly():
    text = render(_sample(), width=80)
    assert "    0 view         [B=2, T=6, H=8, d_k=64]              view          contiguous" in text
    assert "✓ checked all 2 ops that could carry a layout bug: every axis keeps its meaning" in text


def test_show_into_a_console_and_repr():
    from rich.console import Console

    t = _sample()
    console = Console(file=io.StringIO(), width=100, color_system=None)
    t.show(console)
    assert "swaps H and T" in console.file.getvalue()
    assert repr(t) == "<Trace: 2 ops, 0 errors, 0 warnings>"


def test_failure_inside_the_block_is_recorded_and_raised():
    import torch

    import shapetrace

    with pytest.raises(RuntimeError, match="view size is not compatible"):
        with shapetrace.trace(dims="B=2 T=6 D=512 H=8") as t:
            y = shapetrace.name(torch.zeros(2, 8, 6, 64), "B H T d_k")
            y.transpose(1, 2).view(2, 6, 512)
    assert [e.op for e in t.events] == ["transpose", "view"]
    failed = t.events[-1]
    assert failed.error.startswith("RuntimeError: view size is not compatible")
    assert failed.inputs[0].stride == (3072, 64, 384, 1) and failed.outputs == []
    assert isinstance(t.exception, RuntimeError)
    from shapetrace.engine.failure import explain_failure

    assert explain_failure(failed).startswith("view(2, 6, 512) has to merge H and d_k (8 × 64 = 512 elements)")


def test_name_outside_tracing_is_a_no_op_and_checks_inside():
    import torch

    import shapetrace
    from shapetrace.errors import UsageError

    x = torch.zeros(2, 3)
    assert shapetrace.name(x, "A B C") is x  # no active trace: nothing checked, nothing done
    with pytest.raises(UsageError, match="3 names given for a tensor with 2 axes"):
        with shapetrace.trace():
            shapetrace.name(x, "A B C")
