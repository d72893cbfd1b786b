"""One attention, two sequences of keys: the scores made on one line of one module hold the keys of one
declared sequence at one call and of another at a later call (Whisper's cross-attention, which reads the
encoder's ``S`` frames at the prefill, handed the decoder's own cache of ``T`` tokens at a decoding step: the
tuple ``past_key_value[:2]`` for ``past_key_value[-2:]``).

A self-attention with a cache reads ``T`` then ``T+1`` (one sequence, grown); a cross-attention reads ``S`` at
every call. Where the first call on a line of a module was a cross-attention (queries of one sequence, keys of
another), keys of another sequence at a later call on that line, for queries of the same sequence, are a
warning, not an error: a module shared on purpose between cross- and self-attention, called in that order, would do
the same, and the run cannot say which. A later call whose queries changed too is the same cross-attention run the
other way (magicleap/SuperGluePretrainedNetwork's ``AttentionalGNN``: one ``'cross'`` layer reads image 1 from
image 0 and image 0 from image 1), not judged. A line whose first call was a self-attention is not judged (a
T5-style ``attend`` shared by the self-attention and then the cross-attention of one module:
tests/corpus/test_guessed_index.py).

Reads: the product events whose result is scores (queries by keys, from the names), their module path and
call site, and the declared token roots their key axis holds. Adds: ``keys-change-sequence`` warnings.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.ops import contracts_by_subscripts, is_matrix_product

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.axes import Axis
    from shapetrace.engine.diagnostic import Diagnostic


def keys_change_sequence(analysis: Analysis) -> list[Diagnostic]:
    """A warning on each call whose scores' keys hold another sequence than the first call on that line did."""
    first: dict[tuple[str, str], tuple] = {}
    out = []
    for e in analysis.events_where(lambda op: is_matrix_product(op) or contracts_by_subscripts(op)):
        o = e.outputs[0] if e.outputs else None
        if o is None or len(o.axes) < 2:
            continue
        root = _sequence(analysis, o.axes[-1])
        seen = first.get((e.module, e.source))
        if seen is None and root is not None and (o.axes[-2].role, o.axes[-1].role) == ("query", "key") \
                and _sequence(analysis, o.axes[-2]) not in (None, root):
            first[(e.module, e.source)] = (e, root, o)   # the line's first call is a cross-attention's scores
        if seen is None or root is None or seen[1] == root:
            continue
        before, was, then = seen
        asked, asked_then = _sequence(analysis, o.axes[-2]), _sequence(analysis, then.axes[-2])
        if None not in (asked, asked_then) and asked != asked_then:
            continue   # (the queries changed too: one cross-attention run both ways, SuperGlue's shared layer)
        out.append(Kind.KEYS_CHANGE_SEQUENCE.found(e.index, (
            f"{e.op} #{e.index} ({e.source}{' in ' + e.module if e.module else ''}) makes scores "
            f"{fmt_named(o.dims, o.shape)} over keys of {root}, but the same line made "
            f"{fmt_named(then.dims, then.shape)} over keys of {was} at #{before.index}: one attention reads two "
            "sequences (a cross-attention handed the decoder's own cache, or one module shared on purpose)."),
            "Hand each attention its own cache: the self-attention's keys and values to the self-attention, the "
            "encoder's to the cross-attention (past_key_value[-2:], or an EncoderDecoderCache)."))
    return out


def _sequence(analysis: Analysis, axis: Axis) -> str | None:
    """The one declared token root a key axis holds (``T`` for ``T+1``), or None."""
    roots = {word for a in axis.atoms for word in re.split(r"[^\w]+", a.root.split("[", 1)[0])}
    tokens = {r for r in roots if r and analysis.namer.is_token_root(r)}
    return next(iter(tokens)) if len(tokens) == 1 else None



def positions_across_sequences(analysis: Analysis) -> list[Diagnostic]:
    """A warning where a table (``nn.Embedding``) is read at an index laid over two different declared
    sequences whose cross-attention the run made (queries of one, keys of the other): a bias at pairs of
    places of two sequences, a distance between a place of one and a place of another
    (huggingface/transformers PR #8518: T5's first decoder block gave its cross-attention
    ``has_relative_attention_bias=True``, so ``compute_bias(T, S)`` added buckets of ``arange(S)[None] -
    arange(T)[:, None]`` to the scores; T5 takes none there). A warning, not an error: a model may align two
    sequences on purpose. A self-attention's table (one sequence, or a cache grown from it: ``T`` and
    ``T+1``) is not judged; names decide which sequence an axis holds, never sizes."""
    crossed: dict[tuple[str, str], object] = {}
    for e in analysis.events_where(lambda op: is_matrix_product(op) or contracts_by_subscripts(op)):
        o = e.outputs[0] if e.outputs else None
        if o is None or len(o.axes) < 2 or (o.axes[-2].role, o.axes[-1].role) != ("query", "key"):
            continue
        pair = _sequence(analysis, o.axes[-2]), _sequence(analysis, o.axes[-1])
        if None not in pair and pair[0] != pair[1]:
            crossed.setdefault(pair, e)
    out = []
    for e in analysis.events_where(lambda spec: spec.looks_up) if crossed else ():
        index = e.inputs[0] if e.inputs else None
        roots = {_sequence(analysis, a) for a in index.axes} if index is not None else set()
        pair = next((p for p in crossed if set(p) <= roots), None)
        if pair is None:
            continue
        scores = crossed[pair]
        out.append(Kind.POSITIONS_ACROSS_SEQUENCES.found(e.index, (
            f"{e.op} #{e.index} reads a table at the index {fmt_named(index.dims, index.shape)}, laid over places "
            f"of two sequences ({pair[0]} and {pair[1]}), and {scores.op} #{scores.index} makes the cross-attention "
            f"scores {fmt_named(scores.outputs[0].dims, scores.outputs[0].shape)} between them: a bias read at the "
            f"distance between a place of {pair[0]} and a place of {pair[1]}, which are not places of one sequence."),
            "Give the cross-attention no relative-position bias (T5: has_relative_attention_bias=False in the "
            "cross-attention layer, a zero bias plus the encoder's padding mask)."))
    return out
