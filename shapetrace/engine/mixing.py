"""The tokens of an attention meet: a dependency contract read on the values (:mod:`.dependencies`).

An attention exists to let each query read the other tokens. Code that calls itself one (a module whose class
name says so, or a softmax over one sequence's scores that the names prove: :func:`.declared.self_attention`)
but in which no output token depends on any other input token computes something else: the keys were
contracted with the values over their features instead of their tokens (cosFormer's ``einsum('nld,nlm->ndm')``
written ``->nlm``), a causal linear attention lost its ``cumsum`` over the tokens, a mask keeps only the
diagonal. Nothing about the names is wrong there, so only the values can tell.

Read after the token contracts held, from what their run already showed: where moving the last token changed
another output, the tokens meet and nothing more is run. Else (a causal attention, where no earlier output may
see the last token, or one whose tokens do not meet) one more forward at batch 2: a copy of entry 0 whose first
token and a seeded random half of the others are moved, and a copy whose other tokens are moved; each copy's
unmoved tokens are compared with entry 0's output in the token contracts' run. Only an attention in which no
token reads any token of the other half stays unchanged in both: a query that reads no key at this
initialisation (a ReLU attention's zero row), a pad, documents packed in one row with a block-diagonal mask
(allenai/OLMo-core's ``cu_doc_lens``) or a dilated pattern leave other tokens that do.

Not measured (nothing said): another floating-point argument that could hold the keys (a cross-attention's
memory, a bias), token ids as the input, outputs that do not line up with the input's tokens, a call that returns
other floating-point tensors besides the one measured (the tokens may meet in those).
"""

from __future__ import annotations

import random
import re

import torch

from shapetrace.engine.declared import self_attention
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.kinds import Kind
from shapetrace.engine.module_state import Isolated, entry_repeated
from shapetrace.engine.token_changes import change_tolerance, changes_of, tokens_last

#: a class name that calls its module an attention (``CausalSelfAttention``, ``GPT2Attention``, ``MHA`` excluded)
_ATTENTION = re.compile(r"attention|attn", re.IGNORECASE)
#: a mask's values: kept (0 or 1) or hidden (a large negative number, ``-inf``)
_HIDDEN_BELOW = -1e3


def attention_declared(events, module) -> str | None:
    """What says the call's tokens must meet: the first self-attention over several queries that the names
    prove (``"softmax #9"``), else the first module of the call whose class name says attention (``"the module
    CosformerAttention"``); None where nothing does (an MLP, a split of heads alone)."""
    for e in events:
        if (self_attention(e) or 0) > 1:
            return f"{e.op} #{e.index}"
    names = (type(m).__name__ for m in module.modules())
    return next((f"the module {name}" for name in names if _ATTENTION.search(name)), None)


def never_mixed(probe, alone: torch.Tensor, both: torch.Tensor) -> list[Diagnostic]:
    """The finding where no output token depends on another input token, in a call that declares an attention
    (``probe.attends``); nothing where the tokens meet or it cannot be measured. ``alone, both``: the token
    contracts' outputs (:func:`.dependencies._outputs`), read first."""
    x = probe.args[probe.position]
    if probe.attends is None or probe.out_tokens is None or probe.entry is not None or probe.last_token is not None \
            or x.shape[probe.tokens] < 2 or both.shape[probe.out_tokens] != x.shape[probe.tokens] \
            or _another_source(probe) or probe.more_outputs:
        return []
    last = x.shape[probe.tokens] - 1
    moved_rows = changes_of(alone, both, probe)[1]
    if any(hit for row in moved_rows for t, hit in enumerate(row) if t != last):
        return []   # (the last token moved another output: the tokens meet)
    half, rest = _halves(x.shape[probe.tokens])
    outs = _moved_run(probe, x.narrow(probe.batch, 0, 1), half, rest)
    unmoved = tokens_last(both.unsqueeze(0), probe)[0, 0]                             # (T, rest) entry 0 as traced
    if outs is None or _any_changed(probe, unmoved, outs[0], rest) or _any_changed(probe, unmoved, outs[1], half):
        return []
    return [Kind.TOKENS_NEVER_MIX.found(None, (
        f"measured on the values: no output token reads another token. With input token{_s(half)} "
        f"{_listed(half)} of batch 0 moved, the output{_s(rest)} of token{_s(rest)} {_listed(rest)} did not "
        f"change; with {_listed(rest)} moved, those of {_listed(half)} did not either (nor any other when the "
        f"last token moved), though {probe.attends} is an attention: each output is made of its own token alone."),
        "Find where the tokens should meet: the keys contracted with the values over the tokens "
        "(einsum('n l d, n l m -> n d m'), not '-> n l m'), a causal running sum (cumsum over the tokens), the "
        "scores q @ k.transpose(-2, -1), or a mask that hides every key but the token's own.")]


def _another_source(probe) -> bool:
    """Does the call take another floating-point tensor that could hold the keys (a memory, a bias table, a
    rotary table): values other than a mask's? Then the input's tokens need not meet and nothing is said."""
    x = probe.args[probe.position]
    given = [a for i, a in enumerate(probe.args) if i != probe.position] + list(probe.kwargs.values())
    given += [b for a in given if isinstance(a, (tuple, list)) for b in a]
    return any(isinstance(a, torch.Tensor) and a is not x and a.is_floating_point() and a.dim() >= 2
               and not a.is_meta and not _mask_like(a) for a in given)


def _mask_like(a: torch.Tensor) -> bool:
    values = a.detach()
    finite = values[values.isfinite()]
    return bool(((finite == 0) | (finite == 1) | (finite <= _HIDDEN_BELOW)).all())


def _halves(tokens: int) -> tuple[list[int], list[int]]:
    """The tokens split in two: the first and a random half of the others (seeded by the length), and the rest."""
    half = sorted([0, *random.Random(tokens).sample(range(1, tokens), (tokens - 1) // 2)])
    return half, [t for t in range(tokens) if t not in half]


def _moved_run(probe, first: torch.Tensor, half: list[int], rest: list[int]) -> torch.Tensor | None:
    """The call's outputs, as (2, T, rest), on two copies of entry 0 (``first``): one with the ``half`` tokens moved
    in random directions, one with the ``rest`` moved (scaled as :func:`.dependencies._pair` scales), in one forward
    at batch 2; None where it cannot run."""
    shape = list(first.shape)
    shape[probe.batch] = 2
    moves = torch.zeros(shape, dtype=first.dtype)                                   # (2, ...)
    tokens = probe.tokens - (probe.tokens > probe.batch)
    noise = torch.Generator().manual_seed(0)
    for entry, moved in ((0, half), (1, rest)):
        rows, at = moves.select(probe.batch, entry), torch.tensor(moved)
        rows.index_copy_(tokens, at, torch.randn(rows.index_select(tokens, at).shape, generator=noise,
                                                 dtype=first.dtype))
    scale = 1.0 + float(torch.linalg.vector_norm(first.detach(), float("inf")))
    two = torch.add(first.detach(), moves.to(first.device), alpha=scale)          # (2, ...) entry 0, moved twice
    out = None
    with Isolated(probe.module, probe.state) as run:
        if run:
            out = run.calling(*entry_repeated(probe), probe.position)(two)
    expected = list(probe.output.shape)
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.dim() != len(expected):
        return None
    expected[probe.out_batch] = 2
    return tokens_last(out.unsqueeze(0), probe)[0] if list(out.shape) == expected else None   # (2, T, rest)


def _any_changed(probe, before: torch.Tensor, after: torch.Tensor, kept: list[int]) -> bool:
    """Did any ``kept`` token's output move from ``before`` to ``after`` (beyond the tolerance, or to NaN)?"""
    at = torch.tensor(kept)
    diff = (after.index_select(0, at) - before.index_select(0, at)).abs()          # (kept, rest)
    if bool(diff.isnan().any()):
        return True
    return bool((diff > change_tolerance(probe, before.unsqueeze(0))).any())


def _listed(tokens: list[int], shown: int = 6) -> str:
    """``"0, 2 and 3"``, or ``"0, 2, 3, 5, 7, 8 and 9 more"`` past ``shown``."""
    words = [str(t) for t in tokens[:shown]]
    if len(tokens) > shown:
        return f"{', '.join(words)} and {len(tokens) - shown} more"
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _s(items: list) -> str:
    return "s" if len(items) != 1 else ""
