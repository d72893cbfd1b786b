"""The backward's diagnostics, from the facts :mod:`.watch`, :mod:`.saved` and the parameters hold.

* ``inplace-on-saved`` — a tensor autograd saved was written in place before a backward that needs it.
  Torch compares the tensor's version with the one it saved when it unpacks it, and refuses; under
  ``saved_tensors_hooks`` (how the tracer sees what autograd keeps) it does not compare, so the session
  compares as each backward starts (:func:`overwritten_refusal`) and raises torch's own error, before
  any gradient is made: a traced script fails where it fails untraced, and the finding names the write;
* ``parameter-without-grad`` — a parameter that requires grad and got none, with the call that took it
  out of autograd's graph (a ``.detach()``, a ``torch.no_grad()`` block, ``.data``);
* ``grad-not-contiguous`` and ``grad-dtype-mismatch`` — a parameter's ``.grad`` after the backward.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from shapetrace.engine.backward.rows import dims_of, text_of
from shapetrace.engine.kinds import Kind
from shapetrace.engine.sites import resolve

#: torch's words when it refuses a saved tensor written in place (autograd's SavedVariable::unpack)
REFUSED = "one of the variables needed for gradient computation has been modified by an inplace operation"
_HINT = ("Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
         "torch.autograd.set_detect_anomaly(True, check_nan=False).")


class Refusal(NamedTuple):
    """A saved tensor found written in place as a backward that needs it started."""

    node: int | None         # the capture's node of the saved tensor (its names)
    shape: tuple[int, ...]
    saver: str               # the autograd node that saved it
    saver_record: int | None
    writer: int | None       # the record that wrote into it (None: no recorded call did)
    then: int                # its version when saved
    now: int                 # its version when the backward started


class GradFacts(NamedTuple):
    """A parameter and its ``.grad`` after the backward (read before the tensors are let go)."""

    name: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    grad_stride: tuple[int, ...] | None   # None: no gradient
    grad_dtype: str
    grad_contiguous: bool
    dims: tuple[str | None, ...]          # the names the backward's table gives the gradient


def refusal_text(handle) -> str:
    """The error torch raises for this overwritten saved tensor, in its own words."""
    tensor = handle.tensor
    creator, number = handle.output_of
    clause = f", which is output {number} of {re.sub(r'Backward[0-9]*$', '', creator.name())}," \
        if creator is not None and creator is handle.saver else ""   # (torch names the op: "Softmax")
    return (f"{REFUSED}: [{tensor.type()} {list(handle.shape)}]{clause} is at version {tensor._version}; "
            f"expected version {handle.version} instead. {_HINT}")


def grad_facts(name: str, parameter, dims: tuple[str | None, ...]) -> GradFacts:
    grad = parameter.grad
    return GradFacts(name, tuple(parameter.shape), parameter.stride(), _dtype(parameter),
                     None if grad is None else grad.stride(), "" if grad is None else _dtype(grad),
                     grad is None or grad.is_contiguous(), dims)


def _dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


# -- findings -----------------------------------------------------------------------------------------

def findings(refusals, missing, grads, capture, inference) -> list:
    """Every finding of the backward: the in-place refusals, the parameters without a gradient (each
    ``(name, cut or None, reading record or None)``), and the gradients' layouts and dtypes."""
    at = _Places(capture, inference)
    found = [_refused(r, at, inference) for r in refusals]
    found += [_no_grad(name, cut, read, at) for name, cut, read in missing]
    for g in grads:
        if not g.grad_contiguous:
            found.append(_not_contiguous(g))
        if g.grad_stride is not None and g.grad_dtype != g.dtype:
            found.append(_dtype_mismatch(g))
    return found


class _Places:
    """``#12 masked_fill_`` and ``model.py:30`` of a record."""

    def __init__(self, capture, inference) -> None:
        self.capture, self.inference = capture, inference

    def event(self, record: int | None) -> int | None:
        return None if record is None else self.inference.event_of_record.get(record)

    def label(self, record: int) -> str:
        event = self.event(record)
        op = self.capture.records[record].spec.name
        return f"#{event} {self.inference.events[event].op}" if event is not None else f"a {op}"

    def where(self, record: int, site: Any = None) -> str:
        source = resolve(getattr(self.capture.records[record], "site", None) or site)[0]
        return "" if source == "?" else f" ({source})"


def _refused(r: Refusal, at: _Places, inference):
    what = text_of(dims_of(inference, r.node, r.shape), r.shape)
    saver = f"{at.label(r.saver_record)}{at.where(r.saver_record)}" if r.saver_record is not None else r.saver
    if r.writer is None:
        writer, fix = "a write shapetrace did not record", "Write into a `.clone()` of the saved tensor instead."
    else:
        op = at.capture.records[r.writer].spec.name
        writer = f"{at.label(r.writer)}{at.where(r.writer)}"
        fix = f"Use `{op[:-1]}`, which returns a new tensor, or write into a `.clone()`." if op.endswith("_") \
            and not op.startswith("__") else "Write into a `.clone()` of the tensor instead."
    message = (f"{writer} writes in place into the {what} tensor that {saver} saved for its backward "
               f"({r.saver} needs it: version {r.then} when saved, {r.now} now): the backward fails with "
               f"\"{REFUSED}\".")
    return Kind.INPLACE_ON_SAVED.found(at.event(r.writer), message, fix,
                                       also=tuple(e for e in (at.event(r.saver_record),) if e is not None))


def _no_grad(name: str, cut, read: int | None, at: _Places):
    if cut is not None:
        label, where = at.label(cut.record), at.where(cut.record, cut.where)
        if not cut.grad_on:
            how = f"it is used at {label}{where} with gradients off (a `torch.no_grad()` block)"
            fix = "Run that call with gradients on (keep `torch.no_grad()` for evaluation and weight updates)."
        elif at.capture.records[cut.record].spec.name == "detach":
            how = f"its path to the loss is cut at {label}{where}: `.detach()` returns a tensor outside autograd"
            fix = "Drop the `.detach()` (keep it only where no gradient may flow back)."
        else:
            how = f"its path to the loss is cut at {label}{where}, whose result is outside autograd"
            fix = "Compute that value with ops autograd differentiates."
        return Kind.PARAMETER_WITHOUT_GRAD.found(at.event(cut.record), f"{name} gets no gradient: {how}.", fix)
    how = (f"{at.label(read)}{at.where(read)} reads its memory through a tensor outside autograd "
           f"(`{name}.data` or a `.detach()`), so the backward cannot reach it.")
    return Kind.PARAMETER_WITHOUT_GRAD.found(at.event(read), f"{name} gets no gradient: {how}",
                                             f"Use the parameter itself there, not `{name}.data`.")


def _not_contiguous(g: GradFacts):
    what = text_of(g.dims, g.shape)
    if g.stride != g.grad_stride:
        why = f"its strides differ from the parameter's {g.stride}"
        fix = f"Give {g.name}.grad the parameter's layout (`.contiguous()` where it is assigned)."
    else:
        why = "autograd gives a parameter's gradient the parameter's own strides, and this parameter is not contiguous"
        fix = "Make the parameter contiguous where it is created (`nn.Parameter(w.contiguous())`)."
    message = (f"{g.name}.grad {what} is not contiguous (strides {g.grad_stride}): {why}; "
               f"`{g.name}.grad.view(-1)` fails, and code that flattens gradients must copy it at every step.")
    return Kind.GRAD_NOT_CONTIGUOUS.found(None, message, fix)


def _dtype_mismatch(g: GradFacts):
    message = (f"{g.name}.grad is {g.grad_dtype} but {g.name} is {g.dtype}: the gradient was made before the "
               f"parameter's dtype changed (assigning `.data` changes the parameter only), and each backward "
               f"adds into it in {g.grad_dtype}.")
    fix = "Change dtypes with `model.to(dtype)` (it converts the gradients too), or clear them first " \
          "(`optimizer.zero_grad()`)."
    return Kind.GRAD_DTYPE_MISMATCH.found(None, message, fix)
