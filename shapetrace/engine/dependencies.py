"""A second witness from the values: which output tokens depend on which input tokens.

After a traced script has run, the outermost module it called is run once more, in eval mode and without gradients,
on a batch of two: its batch entry 0, and a copy of it whose last token is moved in a random direction (one forward
at batch 2), and the outputs are compared:

* **batch entries never mix**: entry 0's output must equal the traced run's own; one that changes when entry 0 runs
  beside another sequence depends on its batch-mates ("output token 3 of batch 0 depends on the other entries'...");
* **each output token depends on its own input token**: the moved last token's own output must change (where it
  changes no output at all, the model drops it, a decoder fed its targets shifted right: not measured);
* **a declared causal mask is honoured** (:mod:`.declared`): the moved last token moves no earlier output.
* **an attention's tokens meet** (:mod:`.mixing`): in code that declares an attention, some output moves with others.

Names say which axis of the input and of the output is the batch and which the tokens (``B`` and ``T`` or their
roles); where they are not known, nothing is measured (equal sizes never decide an axis). Every attribute, buffer and
parameter of every submodule is put back afterwards; a model that cannot take a batch of two is not measured. Plain
data out: findings and the names of the contracts that held.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from shapetrace.engine import probe_inputs
from shapetrace.engine.declared import declared_probe
from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.directions import causal_triangle, tokens_reversed
from shapetrace.engine.kinds import Kind
from shapetrace.engine.mixing import attention_declared, never_mixed
from shapetrace.engine.module_state import Isolated, entry_repeated, first_output, more_outputs
from shapetrace.engine.picks import Picks
from shapetrace.engine.pooled import blind as pooled_blind
from shapetrace.engine.probe_inputs import AtEntry, batch_attended, batch_reordered, entry_of, input_of, other_sequence
from shapetrace.engine.probe_inputs import companions as probe_companions
from shapetrace.engine.token_changes import change_tolerance, changes_of, tokens_last
from shapetrace.engine.unattended import masked_rows, unattended_rows

#: the contracts' names, as the verdict lists those that held
BATCH, OWN_TOKEN, CAUSAL = "batch entries stay apart", "each token depends on itself", "the causal mask holds"
#: what the verdict says was not measured on the meta device
META = "the dependency contracts (the meta device has no values)"
#: the contracts read on the tokens, as the verdict lists them where they were not measured
TOKEN_CONTRACTS = f"{BATCH}, {OWN_TOKEN}"
DROPPED = f"{OWN_TOKEN} (the last input token reaches no output: a decoder fed its targets shifted right drops it)"
#: what the verdict says where the traced code called no module (plain functions): nothing to run again
NO_MODULE = "the dependency contracts (no nn.Module was called to run again on perturbed copies)"


def not_measured(reason: str, contracts: str = "the dependency contracts") -> str:
    """``"the dependency contracts (the model cannot take a batch of two)"``: what was not measured, and why."""
    return f"{contracts} ({reason})"


@dataclass(frozen=True)
class Probe:
    """What to run again and where its batch and token axes are.

    Attributes:
        module: the outermost module the traced code called.
        args, kwargs: its arguments, as called (``args[position]`` is the input perturbed).
        position: which positional argument is the input; batch, tokens: the input's batch and token axes.
        out_batch, out_tokens: the output's (out_tokens None: the output has no token axis).
        causal: the op that declares a causal mask (``"tril #4"``), or None; output: the first traced output.
        heads, heads_reason: where the heads are split and merged (:mod:`.heads`), or why not measured.
        companions: every other tensor argument that has the batch axis (an attention mask, the memory of
            a cross-attention), as ``(position or keyword, its batch axis)``, and every list declared to
            hold one number per batch entry (padding lengths), as ``(position or keyword, None)``: the
            measuring run gives each its batch entry 0 too, as it gives the input.
        state: the modules' attributes and buffers as they were when the call began (:func:`.module_state.snapshot`),
            put back before the measuring run (a cache the call itself, or later calls, filled), or None.
    """

    module: Any
    args: tuple
    kwargs: dict
    position: int
    batch: int
    tokens: int
    out_batch: int
    out_tokens: int | None
    causal: str | None = None
    output: Any = None
    heads: tuple = ()            # :class:`.heads.HeadsPlan` s: where each attention splits and merges heads
    heads_reason: str | None = None   # why the heads are not measured (no plan)
    hooks: tuple = ()            # :class:`.head_hooks.Hooks`: the same at module boundaries, where proven
    companions: tuple = ()       # ((position or keyword, batch axis or None: a per-entry list), ...)
    state: Any = None            # :func:`snapshot` of the module when the call began
    entry: Any = None            # :class:`.probe_inputs.Entry`: where token ids become floats (the input is ids)
    unattended: frozenset = frozenset()   # (batch entry, query) with no key left (:mod:`.unattended`): no leak there
    tokens_reason: str | None = None   # why the output's tokens are not compared with the input's (out_tokens None)
    #: the output's index of the input's last token where the output's tokens run on past it (``T+1``: a prefill's
    #: outputs joined with a decoding step's); None: the output's last
    last_token: int | None = None
    attends: str | None = None   # what declares an attention, whose tokens must meet (:mod:`.mixing`), or None
    more_outputs: bool = False   # other floating-point tensors returned besides ``output`` (:mod:`.mixing`)


def measure(probe: Probe) -> tuple[list[Diagnostic], list[str], list[str]]:
    """The broken contracts as findings, the names of those that held (nothing when not measured) and
    what was not measured (``"heads (no heads axis found)"``)."""
    quick = _every_contract_held(probe) if probe.hooks else None
    if quick is not None:
        return [], quick, []
    heads = _HeadsRun(probe)
    outs = _outputs(probe, heads)
    if isinstance(outs, str):
        return [], [], [not_measured(outs)]
    found, held = _judged(*outs, probe)
    dropped = not found and held[:1] == [BATCH] and probe.out_tokens is not None and OWN_TOKEN not in held
    found, held, paired = _sequence_checked(probe, found, held, dropped)
    found, held, placed, picks = _place_checked(probe, found, held)
    found, held, unheld = _picks_checked(probe, outs[0], picks, found, held)
    found += never_mixed(probe, *outs) if not found and OWN_TOKEN in held else []
    paired += [DROPPED] if dropped and not paired else []
    if held and held[0] == BATCH:   # batch entries mixed: what heads see says nothing more
        if heads.findings:
            found += heads.findings
        elif heads.reason is None and heads.plans:
            from shapetrace.engine.heads import held as heads_held
            held.append(heads_held(heads.plans))
    unmeasured = [heads.reason] if heads.reason and held and held[0] == BATCH else []
    return found, held, unmeasured + paired + placed + unheld + _without_tokens(probe, held)


#: the token contracts' findings: each compares entry 0 at batch place 0 with its moved copy at place 1
_TOKEN_KINDS = (Kind.TOKEN_IGNORES_ITSELF, Kind.CAUSAL_MASK_LEAKS, Kind.POOLED_MISSES_LAST_TOKEN)


def _sequence_checked(probe: Probe, found: list, held: list[str], dropped: bool) -> tuple[list, list[str], list[str]]:
    """A token contract that broke (or a moved last token that reached no output, ``dropped``) where another argument
    is a second sequence of the input's very shape (other floats: an encoder-decoder called with the source first and
    the target after it, as keras-io's ``(src, src_mask, tgt, tgt_mask)``): the output's tokens may follow that one,
    and moving the input's last token then says nothing of them. The token contracts are not measured there."""
    if not dropped and not any(d.kind in _TOKEN_KINDS for d in found):
        return found, held, []
    x = probe.args[probe.position]
    for key, _ in probe.companions:
        other = (probe.args if isinstance(key, int) else probe.kwargs)[key]
        if isinstance(other, torch.Tensor) and other.is_floating_point() and other.shape == x.shape \
                and not torch.equal(other, x):
            name = probe_inputs.argument_name(probe.module, key)
            return [d for d in found if d.kind not in _TOKEN_KINDS], held[:1], [not_measured(
                f"{name} is a second sequence of the input's shape: which of the two the output's tokens follow "
                "cannot be told", _token_contracts(probe))]
    return found, held, []


def _place_checked(probe: Probe, found: list, held: list[str]) -> tuple[list, list[str], list[str], list]:
    """A token contract that broke, checked first against the model treating the batch's places alike: the
    moved copy ran at place 1 and entry 0 at place 0, so a model that gives one sequence another output at
    another place (a table cut to ``x.size(0)`` on batch-first input: songyangco/GETNext issue #2) changes
    every token of the copy, and the token contracts would blame the moved token. One more forward (entry 0 at
    both places), only where a token contract broke: where the two outputs differ, that is the finding, and
    what each token depends on was not measured. Last: the picks that forward made by value (:mod:`.picks`),
    for :func:`_picks_checked`."""
    if not any(d.kind in _TOKEN_KINDS for d in found):
        return found, held, [], []
    made = Picks()
    with Isolated(probe.module, probe.state) as run:
        if run:
            first = probe.args[probe.position].narrow(probe.batch, 0, 1)                 # (1, ...) entry 0
            with made:
                twice = run.calling(*entry_repeated(probe), probe.position)(torch.cat([first, first], probe.batch))
            place0, place1 = tokens_last(twice.unsqueeze(0), probe)[0].chunk(2)       # (1, T, rest) each
            tolerance = change_tolerance(probe, place0)
            differ = ((place0 - place1).abs() > tolerance).any(-1)[0].nonzero().flatten().tolist()
            if differ:
                token = f"output token {differ[0]}" if probe.out_tokens is not None else "the output"
                kept = [d for d in found if d.kind not in _TOKEN_KINDS]
                return kept + [Kind.BATCH_PLACE_MATTERS.found(None, (
                    f"measured on the values: one sequence run at batch places 0 and 1 gives two outputs ({token} "
                    f"differs, {len(differ)} in all): what an entry gets depends on its place in the batch, as "
                    "where a table is cut or indexed by the batch's length or an entry's index."),
                    "Find the table read by batch place (pe[:x.size(0)] on batch-first input: cut it with the "
                    "tokens' length, x.size(1), and broadcast it over the batch).")], held[:1], \
                    [not_measured("a sequence's output depends on its place in the batch", f"{OWN_TOKEN}, {CAUSAL}")], \
                    []
    return found, held, [], made.recorded


def _picks_checked(probe: Probe, alone, picks: list, found: list, held: list[str]) -> tuple[list, list[str], list[str]]:
    """A token contract that broke, measured again with ``picks`` held (those made by value with entry 0 at both
    places, :func:`_place_checked`): a model that routes tokens by value (Mixture-of-Depths' topk over router
    scores) picks others when the last token moves, and every output it picks or skips changes, wherever the data
    flows. One more forward, only where a token contract broke and a pick was made: where a pick changed, the
    token contracts are read on the run with the picks held."""
    if not picks or not any(d.kind in _TOKEN_KINDS for d in found):
        return found, held, []
    with Isolated(probe.module, probe.state) as run:
        if not run:
            return found, held, []
        call, first = run.calling(*entry_repeated(probe), probe.position), \
            probe.args[probe.position].narrow(probe.batch, 0, 1)                      # (1, ...) entry 0
        try:
            with Picks(picks) as kept:
                both = _moved_run(call, probe, first, lambda c, x: c(x))              # (2, ...) picks held
        except Exception:   # (NotHeld, or a model that cannot take a held pick: not measured, never a crash)
            both = None
    if both is not None and not kept.moved:
        return found, held, []
    kept_found, contracts = [d for d in found if d.kind not in _TOKEN_KINDS], _token_contracts(probe)
    if not isinstance(both, torch.Tensor):
        return kept_found, held[:1], [not_measured("which tokens are picked by value changes with a later token, "
                                                   "and the picks could not be held", contracts)]
    refound, reheld = _judged(alone, both, probe)
    picked = " and ".join(kept.moved)
    if len(reheld) > 1:
        reheld[-1] += f" (with {picked}'s picks by value held: which tokens it picks changes with a later one)"
    return kept_found + [_with_picks_held(d, picked) for d in refound if d.kind in _TOKEN_KINDS], reheld, []


def _with_picks_held(d: Diagnostic, picked: str) -> Diagnostic:
    """A token contract broken on the run with the picks held, said so (a causal leak: how picks leak)."""
    if d.kind != Kind.CAUSAL_MASK_LEAKS:
        return replace(d, message=f"{d.message} Measured with {picked}'s picks by value held.")
    return replace(d, message=f"{d.message} Measured with {picked}'s picks by value held.", fix=(
        f"{d.fix} Tokens picked by value ({picked}) come in the order of their values: a causal mask over them "
        "needs them in sequence order first (torch.sort the picked indices)."))


def _without_tokens(probe: Probe, held: list[str]) -> list[str]:
    """What an output without a token axis (a pooled vector) leaves unmeasured, once the batch held."""
    if probe.out_tokens is not None or held[:1] != [BATCH]:
        return []
    return [not_measured(probe.tokens_reason or "the output has no token axis", _token_contracts(probe))]


def _token_contracts(probe: Probe) -> str:
    """The token contracts the probe would measure, as the verdict lists them: the causal one where declared."""
    return f"{OWN_TOKEN}, {CAUSAL}" if probe.causal is not None else OWN_TOKEN


def _every_contract_held(probe: Probe) -> list[str] | None:
    """The contracts that held, measured in one forward with the heads moved and read at module
    boundaries (:mod:`.head_hooks`), where every contract held; None (a finding, a guard that failed):
    measure again the full way, which says what broke and how."""
    from shapetrace.engine import head_hooks
    from shapetrace.engine.heads import held as heads_held

    if probe.companions and any(h.grown for h in probe.hooks):
        return None   # (copies that enter with the input would need a mask's or a memory's copies too)
    run = head_hooks.Run(probe.module, probe.hooks, probe.batch, probe.out_batch)
    outs = _outputs(probe, run)
    if isinstance(outs, str) or not run.held:
        return None
    found, held = _judged(*outs, probe)
    return None if found or held[:1] != [BATCH] or never_mixed(probe, *outs) else [*held, heads_held(probe.heads)]


class _HeadsRun:
    """The heads contract, measured in the same forward as the token contracts (:mod:`.heads`), in
    every attention the top call ran: the plans, then what the run found or why it was not measured."""

    def __init__(self, probe: Probe):
        self.plans, self.reason, self.findings = probe.heads or (), probe.heads_reason, []

    def forward(self, run, x):
        """``run(x)`` with the heads moved at the splits and read at every merge; else the plain run (and why)."""
        if not self.plans:
            return run(x)
        from shapetrace.engine import heads

        attentions = [heads.Attention(plan, heads.one_head_each(plan) if heads.grouped(plan) else None)
                      for plan in self.plans]   # (grouped-query heads: each moved apart, in one run)
        try:
            with heads.HeadsMode(attentions):
                result = run(x)
            self.findings = [d for a in self._detected(run, x, attentions) for d in a]
            return result
        except Exception as exc:   # the model cannot take the copies (a mask sized for the batch...)
            self.reason = exc.args[0] if isinstance(exc, heads.NotMeasured) else \
                "heads (the model cannot take a copy of its batch per head)"
            self.findings = []
            return run(x)

    def _detected(self, run, x, attentions) -> list[list]:
        """Each attention's findings (a second run, moving the queries, keys and values apart, for those
        whose heads leaked)."""
        from shapetrace.engine import heads

        detected = []
        for a in attentions:
            if a.read is None:
                raise heads.NotMeasured("heads (the measuring run did not reach the merge)")
            detected.append(heads.reached(a.plan.heads, a.reference, a.read))
            if not any(detected[-1]):
                raise heads.NotMeasured("heads (moving them changed nothing at the merge)")
        leaking = [a for a, d in zip(attentions, detected)
                   if not heads.grouped(a.plan) and heads.leaks(a.plan, a.kinds, d)]
        separate = dict(zip(map(id, leaking), self._separate(run, x, leaking))) if leaking else {}
        separate.update({id(a): (d, a.kinds) for a, d in zip(attentions, detected) if heads.grouped(a.plan)})
        return [heads.findings(a.plan, d, separate.get(id(a))) for a, d in zip(attentions, detected)]

    def _separate(self, run, x, leaking) -> list[tuple]:
        """Which tensor leaked: a second run moving each split's heads alone (only where heads leaked)."""
        from shapetrace.engine import heads

        attentions = [heads.Attention(a.plan, heads.one_head_each(a.plan)) for a in leaking]
        with heads.HeadsMode(attentions):
            run(x)
        if any(a.read is None for a in attentions):
            raise heads.NotMeasured("heads (the second measuring run did not reach the merge)")
        return [(heads.reached(a.plan.heads, a.reference if a.reference is not None else first.reference, a.read),
                 a.kinds) for a, first in zip(attentions, leaking)]


def _pair(first: torch.Tensor, probe: Probe) -> torch.Tensor:
    """``first`` (batch entry 0) beside a copy of itself whose last token is moved in a random direction
    (not a constant one: a norm over the features would cancel a uniform shift), made in one op."""
    shape = list(first.shape)
    shape[probe.batch] = 2
    scale = 1.0 + float(torch.linalg.vector_norm(first.detach(), float("inf")))   # (1 + the largest |value|)
    moves = _moves(tuple(shape), probe.batch, probe.tokens, first.dtype, first.device)
    return torch.add(first.detach(), moves, alpha=scale)                           # (2, ...), broadcast


#: the pair's unit moves (zero but on entry 1's last token), made once per layout (a few)
_MOVES: dict[tuple, torch.Tensor] = {}


def _moves(shape: tuple, batch: int, tokens: int, dtype, device) -> torch.Tensor:
    key = (shape, batch, tokens, dtype, device)
    moves = _MOVES.get(key)
    if moves is None:
        moves = torch.zeros(shape, dtype=dtype)
        last = moves.select(batch, 1).select(tokens - (tokens > batch), shape[tokens] - 1)   # entry 1's last token
        last.copy_(torch.randn(last.shape, generator=torch.Generator().manual_seed(0), dtype=dtype))
        moves = moves.to(device)
        if len(_MOVES) < 16:
            _MOVES[key] = moves
    return moves


def _outputs(probe: Probe, heads: _HeadsRun) -> tuple[torch.Tensor, torch.Tensor] | str:
    """``(alone, both)``: batch entry 0's output in the traced batch, and in a batch of two beside a
    copy of itself whose last token was moved (both outputs, on the batch axis); why not, where the model
    cannot be run so. One forward at batch 2 (at most the traced forward's cost): entry 0's output in the traced
    batch is the traced run's own where every module was in eval mode (else it is run again, in eval
    mode). Token ids (``probe.entry``) are fed as entry 0 twice and moved where they become floats."""
    x, out = probe.args[probe.position], probe.output
    if not isinstance(x, torch.Tensor) or x.is_meta or not (x.is_floating_point() or probe.entry is not None):
        return "the input is not a floating-point tensor"
    if x.shape[probe.batch] < 2:
        return "a batch of one entry"
    with Isolated(probe.module, probe.state) as run:
        if not run:
            return "the model's buffers are too large to save and put back"
        alone = out if not run.training and isinstance(out, torch.Tensor) else \
            run.calling(probe.args, probe.kwargs, probe.position)(x)
        call, first = run.calling(*entry_repeated(probe), probe.position), x.narrow(probe.batch, 0, 1)
        both = _moved_run(call, probe, first, heads.forward)
        if isinstance(both, str):
            return both
        if not isinstance(both, torch.Tensor) or not both.is_floating_point() or both.shape[probe.out_batch] != 2:
            return "the measuring run's output has no batch of two floating-point entries"
        return alone.detach().narrow(probe.out_batch, 0, 1), both   # (the traced output may need grad)
    return "the model cannot take a batch of two"


def _moved_run(call, probe: Probe, first: torch.Tensor, forward):
    """``forward(call, x)`` on entry 0 (``first``) beside its moved copy: floats moved at the last token, token ids
    where they become floats; why not, where the run did not reach that place."""
    if probe.entry is None:
        return forward(call, _pair(first, probe))                                  # (2, ...) entry 0, moved
    call, entry = _moved_at_entry(call, probe)
    both = forward(call, torch.cat([first, first], probe.batch))                 # (2, ...) entry 0's ids twice
    return both if entry.reached else \
        f"the measuring run did not reach {probe.entry.label}, where the token ids become floats"


def _moved_at_entry(call, probe: Probe):
    """``call`` run with the entry's result (the token ids made floats) moved as :func:`_pair` moves a
    floating-point input, twice: as the run and as what says whether its last call did (``reached``)."""
    at = replace(probe, batch=probe.entry.batch, tokens=probe.entry.tokens)
    run = AtEntry(call, probe.entry, lambda result: _pair(result.narrow(at.batch, 0, 1), at))
    return run, run


def measure_heads(module, args: tuple, kwargs: dict, plans: tuple) -> tuple[list[Diagnostic], list[str], list[str]]:
    """Only the heads contract (no batch or token axis is named, or the input holds token ids: the token
    contracts cannot be), on the traced input itself, unchanged (the heads are moved at the splits): the
    findings, the contracts that held and why the heads were not measured (nothing where they were)."""
    from shapetrace.engine.heads import HEADS, held

    position = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor)), None)   # (token ids too)
    if position is None or args[position].is_meta:
        return [], [], [not_measured("no tensor to run the model on again", HEADS)]
    heads = _HeadsRun(Probe(module, tuple(args), dict(kwargs), position, 0, 0, 0, None, heads=plans))
    with Isolated(module) as run:
        if run:
            heads.forward(run.calling(args, kwargs, position), args[position])
    if heads.findings:
        return heads.findings, [], []
    if heads.reason is None and run.ran:
        return [], [held(plans)], []
    return [], [], [heads.reason or not_measured("the model cannot be run again on its own input", HEADS)]


def _judged(alone, both, probe: Probe) -> tuple[list[Diagnostic], list[str]]:
    found, held = [], []
    changes, changed = changes_of(alone, both, probe)                                # (B, T) each
    mixed = [(b, t) for b, row in enumerate(changes) for t, hit in enumerate(row) if hit]
    if mixed:
        b, t = mixed[0]
        token = f"output token {t} of batch {b}" if probe.out_tokens is not None else f"the output of batch {b}"
        found.append(Kind.BATCH_ENTRIES_MIX.found(None, (
            f"measured on the values: {token} depends on the other batch entries' tokens (it changes when batch 0 "
            f"runs beside another sequence instead of its own batch, as do {len(mixed)} output token"
            f"{'s' if len(mixed) != 1 else ''} of it in all). Batch entries must never mix: an axis was regrouped "
            "or reduced across the batch, or a size was read from the batch axis."),
            "Find the op that reads across the batch axis (the findings above may name it): a view that regroups it, "
            "a reduction over it, a table sized by x.size(0)."))
        return found, held   # tokens scrambled across the batch: what each token sees says nothing more
    held.append(BATCH)
    if probe.out_tokens is None:   # a pooled vector: a causal model's reads the last token (:mod:`.pooled`)
        return found + pooled_blind(probe, changed), held
    last = len(changed[0]) - 1 if probe.last_token is None else probe.last_token
    blind = [b for b, row in enumerate(changed) if not row[last] and any(row)]   # (a row unchanged: DROPPED)
    if blind:
        found.append(Kind.TOKEN_IGNORES_ITSELF.found(None, (
            f"measured on the values: output token {last} of batch {blind[0]} does not change when its own "
            "input token changes: each output token must depend on its own input token."),
            "Check the mask (a key mask that hides each token from itself) and the axis the attention runs over."))
    elif all(any(row) for row in changed):
        held.append(OWN_TOKEN)
    if probe.causal is not None:
        early = [(b, t) for b, row in enumerate(changed) for t, hit in enumerate(row[:last])
                 if hit and (b, t) not in probe.unattended]
        if early:
            b, t = early[0]
            found.append(Kind.CAUSAL_MASK_LEAKS.found(None, (
                f"measured on the values: output token {t} of batch {b} depends on input token {last}, a later "
                f"token, though the code declares a causal mask ({probe.causal}): the mask lets queries see the future "
                "(reversed, or not applied), or another op brings a later token in (a softmax, sum or FFT over the "
                "tokens)."), "A causal mask keeps the diagonal and below: ones(T, T).tril(); masked_fill where it is "
                "0. Every other op across the tokens must read earlier ones only (a cumsum, not a sum over them)."))
        else:
            held.append(CAUSAL)
    return found, held


def probe_or_reason(top_call: tuple | None, labels_of, role_of, events, by_size: bool = False,
                    triangle: str | None = None, entry_of=None, per_entry: tuple = ()) -> Probe | str:
    """The probe of a traced run's outermost module call, or why the token contracts cannot be measured
    on it (its input's batch and token axes are not named...). ``labels_of(tensor)``: the trace's labels;
    ``role_of(label)``: the label's role; ``events``: the trace's events, where a causal mask is
    declared; ``by_size``: names were found from sizes alone, so a batch and a token axis of equal size
    cannot be told apart and nothing is measured. An output whose own batch axis has no name (the bug
    may have mixed it) but that has the input's shape is read on the input's axes. ``triangle``: the
    attention weights' zero triangle, if any (a causal mask declared by its values, whichever way round
    it was applied). ``entry_of(ids)``: where an input of token ids becomes floats (:mod:`.probe_inputs`),
    or why not. ``per_entry``: the arguments declared to hold one number per batch entry (any other list
    of numbers as long as the batch: nothing is measured, since which number goes with which entry
    cannot be told)."""
    if top_call is None:
        return "no module call was kept"
    module, args, kwargs, result, *state = top_call
    out = first_output(result)
    position, entry = input_of(args, entry_of)
    if isinstance(entry, str) or position is None or not isinstance(out, torch.Tensor):
        return entry if isinstance(entry, str) else "no tensor goes in and comes out of the call"
    x = args[position]
    axes_in, axes_out = _roles(labels_of(x), role_of), _roles(labels_of(out), role_of)
    if "batch" not in axes_out and out.shape == x.shape:
        axes_out = axes_in
    if "batch" not in axes_in or "tokens" not in axes_in:
        return _unmeasured_axes(labels_of(x), role_of)
    if by_size and x.shape[axes_in["batch"]] == x.shape[axes_in["tokens"]]:
        return "names were found from sizes alone, and the batch and the tokens are as long as each other"
    if "batch" not in axes_out:
        return "the output's batch axis has no name"
    companions = probe_companions(args, kwargs, position, x.shape[axes_in["batch"]], labels_of, role_of, module,
                                  per_entry, by_size and x.shape[axes_in["tokens"]], x.shape[axes_in["tokens"]])
    if isinstance(companions, str):
        return companions
    other = other_sequence(labels_of(x), axes_in["tokens"], labels_of(out), axes_out.get("tokens"))
    return Probe(module, tuple(args), dict(kwargs), position, axes_in["batch"], axes_in["tokens"],
                 axes_out["batch"], None if other else axes_out.get("tokens"),
                 None if tokens_reversed(events, role_of) else _causal(events, triangle), out,
                 companions=companions, state=state[0] if state else None, entry=entry, tokens_reason=other,
                 last_token=_input_last(labels_of(x)[axes_in["tokens"]], labels_of(out), axes_out.get("tokens"),
                                        x.shape[axes_in["tokens"]]), more_outputs=more_outputs(result, out))


def _input_last(mine, labels_out, tokens_out: int | None, length: int) -> int | None:
    """Where the input's last token sits in an output whose tokens run on past the input's (``T`` -> ``T+1``:
    a prefill's outputs joined with a decoding step's, the step's last), or None (the output's last)."""
    theirs = labels_out[tokens_out] if tokens_out is not None else None
    return length - 1 if mine and theirs and theirs.startswith(mine + "+") else None


def _unmeasured_axes(labels, role_of) -> str:
    """Why the input has no one batch axis and one token axis (:func:`_roles`): ``"the input's tokens lie on 2
    axes (Hp, Wp), and the contracts move the tokens of one axis"`` (sam2's ``[B, Hp, Wp, D]``)."""
    why = []
    for role, axis, entries in (("batch", "batch axis", "batch entries"), ("tokens", "token axis", "tokens")):
        named = [label for label in labels if label and role_of(label) == role]
        why += [f"{axis} has no name"] if not named else [] if len(named) == 1 else [
            f"{entries} lie on {len(named)} axes ({', '.join(named)}), and the contracts move those of one axis"]
    both = why == ["batch axis has no name", "token axis has no name"]
    return "the input's batch and token axes have no names" if both else "the input's " + ", and its ".join(why)


def _roles(labels, role_of) -> dict[str, int]:
    """role -> the one axis that has it (a role on two axes is left out)."""
    found: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        role = role_of(label) if label else None
        if role in ("batch", "tokens"):
            found.setdefault(role, []).append(i)
    return {role: axes[0] for role, axes in found.items() if len(axes) == 1}


def _causal(events, triangle: str | None = None) -> str | None:
    """What declares a causal mask: the first causal triangle (``tril(0)``, not a look-ahead ``tril(2)``:
    :func:`.directions.causal_triangle`), ``is_causal=True`` or mask shaped like one (``"tril #4"``), else
    attention weights with a zero triangle; None when nothing does."""
    for e in events:
        if causal_triangle(e) or e.params.get("is_causal") or e.params.get("mask_pattern") == "causal":
            return f"{e.op} #{e.index}"
    return f"the attention weights are {triangle}" if triangle else None


def measure_trace(trace) -> tuple[list, list[str], list[str]]:
    """``(broken contracts as findings, the contracts that held, what was not measured)`` of a finished
    trace, measured on the first outermost module call its capture kept (none kept: nothing measured)."""
    call, trace.capture.top_call = trace.capture.top_call, None
    if call is None:
        return [], [], [NO_MODULE] if trace.capture.keep_top_call and trace.events else []
    if any(isinstance(a, torch.Tensor) and a.is_meta for a in call[1]):
        return [], [], [META]
    probe = probe_or_reason_of(trace, call)
    if isinstance(probe, Probe):
        trace.probe = probe   # (for the padding contract: :mod:`.padding`)
        return measure(declared_probe(trace, probe))
    tokens = not_measured(probe, TOKEN_CONTRACTS)
    plans = plans_of(trace)   # no batch or token axis named: the heads alone, where the structure shows them
    if isinstance(plans, str):
        return [], [], [tokens, plans]
    found, held, why = measure_heads(call[0], call[1], call[2], plans)
    return found, held, [tokens, *why]


def probe_of(trace, call: tuple) -> Probe | None:
    """The probe of a finished trace's outermost module call ``call``, with where its heads are split and
    merged (or why they are not measured); None where its batch and token axes have no names."""
    return probe if isinstance(probe := probe_or_reason_of(trace, call), Probe) else None


def probe_or_reason_of(trace, call: tuple) -> Probe | str:
    """:func:`probe_of`, or why the token contracts cannot be measured on ``call``."""
    probe = probe_or_reason(call, lambda t: trace.namer.dims_of(trace.axes_of(t)), trace.namer.role, trace.events,
                            trace.seeded_by_size, trace._triangle, lambda ids: _entry_of(trace, ids),
                            trace.capture.per_entry)
    if isinstance(probe, str) or (moved := batch_reordered(trace.events, trace.namer.role)
                                  or batch_attended(trace.events, trace.namer.role)):
        return probe if isinstance(probe, str) else moved
    probe = replace(probe, attends=attention_declared(trace._inferred().events, call[0]))   # (all the events)
    if probe.out_tokens is not None:
        o, x = probe.output, probe.args[probe.position]
        batch, tokens, first = o.shape[probe.out_batch], o.shape[probe.out_tokens], x.shape[probe.tokens]
        probe = replace(probe, unattended=unattended_rows(trace._uniform_rows, batch, tokens, first)
                        | unattended_rows(masked_rows(trace.capture.records), batch, tokens, first))
    plans = plans_of(trace)
    if isinstance(plans, str):
        return replace(probe, heads_reason=plans)
    from shapetrace.engine.head_hooks import points

    capture = trace.capture
    tensors = [a for a in (*call[1], *call[2].values()) if isinstance(a, torch.Tensor)]
    inputs = frozenset(n for n in map(capture.known_node, tensors) if n is not None)
    hooks = points(capture.records, capture.nodes, capture.top_span, capture.module_calls.path, plans, inputs)
    return replace(probe, heads=plans, hooks=hooks)


def _entry_of(trace, ids: torch.Tensor):
    """Where the token ids ``ids`` become floats in the trace's top call (:mod:`.probe_inputs`), or why not."""
    from shapetrace.engine.indices import node_labels

    node = trace.capture.known_node(ids)
    if node is None:
        return "the input is integer token ids the trace did not see"
    inference = trace._inferred()
    return entry_of(trace.capture.records, trace.capture.top_span, node, node_labels(inference.axes, trace.namer),
                    trace.namer.role, inference.event_of_record)


def plans_of(trace) -> tuple | str:
    """Where each attention of a finished trace's top call splits and merges its heads, or why not measured."""
    from shapetrace.engine import heads

    try:
        inference = trace._inferred()   # (all the events: ``trace.events`` may be a filtered copy)
        return heads.plan_heads(trace.capture.records, trace.capture.top_span, inference.events,
                                inference.event_of_record, trace.namer.role)
    except heads.NotMeasured as exc:
        return exc.args[0]
