"""Where the pooled contract (:mod:`.pooled`) was not measured: a causal model's pooled output whose token is picked
from a mask among its arguments is then ``?``, never ``✓``, whichever entry point ran the trace (the CLI measures
the dependency contracts; ``shapetrace.trace`` only with ``dependencies=True``). Apart from :mod:`.pooled`, which
:mod:`.dependencies` imports, so that this module may read the causal mask the way :mod:`.dependencies` does.
Plain data out.
"""

from __future__ import annotations

from shapetrace.engine.dependencies import _causal
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.indices import node_labels
from shapetrace.engine.kinds import Kind
from shapetrace.engine.pooled import entry_zero_unpadded


def unmeasured_read(trace) -> list[Diagnostic]:
    """A note (the verdict ``?``) where a finished ``trace``'s first outermost call, under a declared causal
    mask, returns a tensor without a token axis (a pooled vector) from arguments that carry the tokens, one of
    them a mask (two axes, batch and tokens by name, integers or booleans), and :func:`.pooled.blind` did not measure
    which token it reads (the dependency contracts not asked for, or the mask proving no entry 0 whole): which
    token the pooling picks is then a fact of the values (an index counted on the mask), and no name or shape
    decides it. One mechanism whichever entry point ran the trace: the CLI measures, the Python API measures
    only with ``dependencies=True``."""
    first, probe = trace.capture.module_calls.first_call, trace.probe
    if first is None or first.output is None or (probe is not None and probe.out_tokens is None
                                                  and probe.causal is not None and entry_zero_unpadded(probe)):
        return []
    labels = node_labels(trace._inferred().axes, trace.namer)
    out = {trace.namer.role(label) for label in labels(first.output) if label}
    carry = [a for a in first.arguments if "tokens" in {trace.namer.role(label) for label in labels(a.node) if label}]
    masks = [a for a in carry if len(a.shape) == 2 and (a.dtype == "bool" or a.dtype.startswith(("int", "uint")))]
    causal = _causal(trace.events, trace._triangle)
    if causal is None or "tokens" in out or "batch" not in out or len(carry) < 2 or not masks:
        return []
    return [Kind.POOLED_READ_UNMEASURED.found(None, (
        f"not measured on the values: which token the pooled output reads. The code declares a causal mask "
        f"({causal}), so only the last real token's output has seen the whole sequence, and which token is the "
        f"last real one is a fact of the values ({masks[0].name} is given beside the tokens), not of names or "
        "shapes. It is measured where that "
        "mask has a row without padding beside a padded one (shapetrace trace, or shapetrace.trace(..., "
        "dependencies=True))."))]
