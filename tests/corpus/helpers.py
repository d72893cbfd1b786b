"""What every case of the issue-21 corpus shares: run it under a trace, find its tagged lines, read
names by role, and say whether a bug was reported where it happens.

A case is a small module or function written in the style of a public project, with a docstring
that cites the public code or bug report it follows. Lines are tagged with a comment that ends in
``[tag]`` (one or more):
``q = ...   # (B, H, T, d_k) [vit-q]``. A case then says

* ``heads``: for a tag, the names the output of the *last* call recorded on that line must carry
  (``tag@0`` reads the first call instead: the prefill of a function that also runs a decode step);
* ``bug``: the tags of the lines where the bug is; an error must be reported on a call made on one
  of them, and its message must name that call's op. A case with no ``bug`` is correct code and
  must get no error at all;
* ``silent``: tags of lines of correct code on which no diagnostic of any severity may be reported
  (a note calling standard code "nonstandard" is a false statement too).

Expected names are exact, except where the spelling of a derived name is not settled by the issue:

* ``seq``: a token axis (its role is tokens): ``T``, ``S``, ``N``, ``T[-1:]``, ``T+1``, ``1+N``, …;
* ``!seq``: anything but a token axis (unnamed is fine);
* ``?``: not checked; ``_``: no name at all;
* ``B*?``: a product that contains ``B`` (a window batch ``B*nW``).

Only the public API is used: ``shapetrace.trace``, ``t.events`` (``op``, ``source``, ``outputs``
with ``shape`` and ``dims``), ``t.diagnostics`` (``severity``, ``kind``, ``message``, and ``event``
where the record has it).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import pytest
import torch

import shapetrace

#: canonical names that index tokens (the issue's vocabulary: T, S, N, and derived ones)
TOKEN_NAMES = ("T", "S", "N", "L", "T_q", "T_k")
_SLICE = r"(?:\[[-\d]*:?[-\d]*(?::[-\d]*)?\])?"
_TOKEN = rf"(?:{'|'.join(TOKEN_NAMES)}){_SLICE}"
#: a token axis spelled from token names: ``T``, ``T[-1:]``, ``T[4:5]``, ``T+1``, ``1+N``, ``S+T``
SEQ_LABEL = re.compile(rf"(?:\d+\+)*{_TOKEN}(?:\+(?:\d+|{_TOKEN}))*")
_TAG = re.compile(r"\[([a-z0-9][\w.:-]*)\]")
_TAGS_AT_END = re.compile(r"(?:\[[a-z0-9][\w.:-]*\]\s*)+$")


@dataclass(frozen=True)
class Case:
    """One corpus case: its sizes, how to build it, what the finished engine must say about it."""

    id: str
    dims: str
    build: Callable[[], tuple[Callable, tuple]]
    heads: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bug: tuple[str, ...] = ()
    silent: tuple[str, ...] = ()        # tags of lines of correct code on which nothing may be reported at all
    names: tuple[str | None, ...] = ()  # shapetrace.name() for each input, where dims alone cannot say
    names_xfail: str | None = None      # why the names are not there yet (issue 21)
    verdict_xfail: str | None = None    # why the verdict is not right yet (issue 21)

    def names_param(self):
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 21: {self.names_xfail}")] if self.names_xfail else []
        return pytest.param(self, id=self.id, marks=marks)

    def verdict_param(self):
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 21: {self.verdict_xfail}")] \
            if self.verdict_xfail else []
        return pytest.param(self, id=self.id, marks=marks)


def trace_case(case: Case):
    """Build the case outside the trace (so parameter initialisation is not recorded), then run it."""
    torch.manual_seed(0)
    forward, inputs = case.build()
    with torch.no_grad(), shapetrace.trace(dims=case.dims) as t:
        for tensor, names in zip(inputs, case.names):
            if names:
                shapetrace.name(tensor, names)
        forward(*inputs)
    return t


# -- tagged lines ------------------------------------------------------------------------------------

def tag_lines(module: ModuleType) -> dict[str, list[int]]:
    """tag -> the line numbers of ``module`` whose comment ends in ``[tag]``."""
    found: dict[str, list[int]] = {}
    for number, line in enumerate(Path(inspect.getsourcefile(module)).read_text().splitlines(), start=1):
        _, hash_, comment = line.partition("#")
        m = _TAGS_AT_END.search(comment) if hash_ else None
        for tag in _TAG.findall(m.group(0)) if m else ():
            found.setdefault(tag, []).append(number)
    return found


def events_on_lines(t, module: ModuleType, lines: list[int]) -> list:
    """The recorded events whose call site is one of ``lines`` of ``module``, in order."""
    tail = "corpus/" + Path(inspect.getsourcefile(module)).name
    out = []
    for e in t.events:
        where, _, number = str(e.source).replace("\\", "/").rpartition(":")
        if number.isdigit() and int(number) in lines and where.endswith(tail):
            out.append(e)
    return out


def tagged_event(t, module: ModuleType, tag: str):
    """The last event on the tagged line; ``tag@k``: the k-th run of that line (among the events on it
    whose op is the line's last op: ``q.view(...).transpose(1, 2)`` at the prefill is ``@0``)."""
    name, _, which = tag.partition("@")
    lines = tag_lines(module).get(name)
    assert lines, f"no line tagged [{name}] in {module.__name__}"
    events = events_on_lines(t, module, lines)
    assert events, f"nothing recorded on the line tagged [{name}] ({lines})"
    if not which:
        return events[-1]
    runs = [e for e in events if e.op == events[-1].op]
    return runs[int(which)]


# -- names by role -----------------------------------------------------------------------------------

def is_tokens(t, label: str | None) -> bool:
    """Is ``label`` a token axis? By the trace's own vocabulary where it has one, else by spelling."""
    if not label:
        return False
    role = getattr(getattr(t, "namer", None), "role", None)
    if callable(role):
        try:
            if role(label) == "tokens":
                return True
        except Exception:   # a vocabulary that cannot read this label: fall back to spelling
            pass
    return bool(SEQ_LABEL.fullmatch(label))


def name_matches(t, want: str, got: str | None) -> bool:
    if want == "?":
        return True
    if want == "_":
        return got is None
    if want == "seq":
        return is_tokens(t, got)
    if want == "!seq":
        return not is_tokens(t, got)
    if want.endswith("*?"):
        factors = got.split("*") if isinstance(got, str) else []
        return want[:-2] in factors and len(factors) >= 2
    return want == got


def names_problems(t, module: ModuleType, case: Case) -> list[str]:
    """Every tagged tensor whose names differ from what the case expects."""
    bad = []
    for tag, want in case.heads.items():
        e = tagged_event(t, module, tag)
        got = tuple(e.outputs[0].dims) if e.outputs else None
        if got is None or len(got) != len(want) or not all(name_matches(t, w, g) for w, g in zip(want, got)):
            bad.append(f"[{tag}] {e.op} -> {e.outputs[0].shape if e.outputs else None}: names {got}, want {want}")
    return bad


# -- no name contradicts its size ---------------------------------------------------------------------

def _sizes(case_dims: str) -> dict[str, int]:
    sizes = dict(shapetrace.parse_dims(case_dims))
    if "d_k" not in sizes and "D" in sizes and "H" in sizes and sizes["D"] % sizes["H"] == 0:
        sizes["d_k"] = sizes["D"] // sizes["H"]
    return sizes


def _value(term: str, sizes: dict[str, int]) -> int | None:
    """The size a name spells: ``T`` -> 5, ``T[-1:]`` -> 1, ``T[2:4]`` -> 2, ``3`` -> 3; None if unknown."""
    if term.isdigit():
        return int(term)
    m = re.fullmatch(r"(\w+)\[(-?\d*):(-?\d*)\]", term)
    if m:
        base = sizes.get(m.group(1))
        if base is None:
            return None
        return len(range(base)[slice(int(m.group(2)) if m.group(2) else None,
                                     int(m.group(3)) if m.group(3) else None)])
    return sizes.get(term)


def label_contradiction(label: str, size: int, sizes: dict[str, int]) -> str | None:
    """Why ``label`` cannot name an axis of ``size`` (sums, products and slices of declared names)."""
    if not re.fullmatch(r"[\w\[\]:+*/-]+", label) or label.startswith("!"):
        return None
    total = Fraction(0)
    for summand in label.split("+"):
        prod = Fraction(1)
        for i, factor in enumerate(re.split(r"([*/])", summand)[0::2]):
            v = _value(factor, sizes)
            if v is None:
                return None
            op = re.split(r"([*/])", summand)[1::2][i - 1] if i else "*"
            prod = prod * v if op == "*" else prod / v
        total += prod
    return None if total == size else f"{label!r} stands for {total}, the axis has {size}"


def contradictions(t, case: Case) -> list[str]:
    sizes = _sizes(case.dims)
    bad = []
    for e in t.events:
        for side, infos in (("in", e.inputs), ("out", e.outputs)):
            for info in infos:
                for axis, (label, size) in enumerate(zip(info.dims or (), info.shape)):
                    problem = label and label_contradiction(label, size, sizes)
                    if problem:
                        bad.append(f"#{e.index} {e.op} {side} axis {axis}: {problem}")
    return bad


# -- verdicts ------------------------------------------------------------------------------------------

def errors(t) -> list:
    return [d for d in t.diagnostics if d.severity == "error"]


def reported_on(d, e) -> bool:
    """Does diagnostic ``d`` report event ``e``, naming its op?"""
    if getattr(d, "event", None) == e.index:
        return e.op in d.message
    return bool(re.search(rf"\b{re.escape(e.op)}\b[^#]{{0,40}}#{e.index}\b", d.message))


def mentions(d, e) -> bool:
    """Is diagnostic ``d`` about event ``e`` (by its event field, or ``#index`` in its message)?"""
    return getattr(d, "event", None) == e.index or bool(re.search(rf"#{e.index}\b", d.message))


def bug_reported(t, module: ModuleType, case: Case) -> bool:
    """An error reported on a call made on a line tagged as the bug, naming that call's op."""
    lines = [n for tag in case.bug for n in tag_lines(module).get(tag, [])]
    assert lines, f"{case.id}: no line tagged {case.bug}"
    suspects = events_on_lines(t, module, lines)
    return any(reported_on(d, e) for d in errors(t) for e in suspects)


def describe(t) -> str:
    return "\n".join(f"{d.severity} {d.kind}: {d.message}" for d in t.diagnostics) or "(no diagnostics)"


def check_names(module: ModuleType, case: Case) -> None:
    t = trace_case(case)
    problems = names_problems(t, module, case) + contradictions(t, case)
    assert problems == [], "\n".join(problems)


def check_verdict(module: ModuleType, case: Case) -> None:
    t = trace_case(case)
    if case.bug:
        assert bug_reported(t, module, case), f"{case.id}: no error on the lines tagged {case.bug}:\n{describe(t)}"
    else:
        assert errors(t) == [], f"{case.id}: correct code got an error:\n{describe(t)}"
    quiet = events_on_lines(t, module, [n for tag in case.silent for n in tag_lines(module).get(tag, [])])
    said = [f"{d.severity} {d.kind}: {d.message}" for d in t.diagnostics for e in quiet if mentions(d, e)]
    assert said == [], f"{case.id}: diagnostics on correct lines {case.silent}:\n" + "\n".join(said)


def corpus_tests(module_name: str, cases: list[Case]) -> tuple[Callable, Callable]:
    """``test_names`` and ``test_verdict`` of one case module, written once: each module binds them
    (``test_names, test_verdict = corpus_tests(__name__, CASES)``) and pytest collects them there."""

    @pytest.mark.parametrize("case", [c.names_param() for c in cases if c.heads])
    def test_names(case):
        check_names(sys.modules[module_name], case)

    @pytest.mark.parametrize("case", [c.verdict_param() for c in cases])
    def test_verdict(case):
        check_verdict(sys.modules[module_name], case)

    return test_names, test_verdict


def traced_named_input(cls, dims: str, **kwargs):
    """``cls(D, H, **kwargs)`` (seeded, eval) traced on ``x = randn(B, T, D)`` named ``B T D``, with the
    sizes read from ``dims`` (``"B=2 T=6 D=32 H=4"``)."""
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")
    torch.manual_seed(0)
    model = cls(D, H, **kwargs).eval()
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        model(x)
    return t


def traced_build(module: ModuleType, bug: str, dims: str, dependencies: bool = False, built_inside: bool = False):
    """A public-style corpus module's ``build(bug, **sizes)`` (the sizes it accepts, read from ``dims``,
    ``"B=2 T=6 D=32 H=4"``) traced under ``no_grad`` with those dims (``dependencies``: the dependency contracts
    measured too, as the CLI's ``trace`` measures them; ``built_inside``: the model and its inputs built under
    the trace too, as ``shapetrace trace FILE`` runs the file's ``__main__`` block)."""
    accepted = inspect.signature(module.build).parameters
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split()) if k in accepted}
    built = None if built_inside else module.build(bug, **sizes)
    with torch.no_grad(), shapetrace.trace(dims=dims, dependencies=dependencies) as t:
        model, inputs = built or module.build(bug, **sizes)
        model(*inputs)
    return t


def error_kinds(t) -> list[str]:
    """The kinds of a trace's errors, in order."""
    return [d.kind for d in t.diagnostics if d.severity == "error"]


ORDER_CAVEAT = " Its names rest on reading the input "


def without_order_caveat(message: str, equal: bool) -> str:
    """A finding's message without the sentence shapetrace/engine/readings.py adds where the input fits two
    orders of equal sizes (``equal``: B = T named by dims alone) and the other order finds another error
    (worded exactly in tests/engine/test_readings.py); the sentence is there exactly when ``equal``."""
    head, caveat, _ = message.partition(ORDER_CAVEAT)
    assert bool(caveat) == equal, message
    return head


# -- a round of public-style files (tests/corpus/publicN): each module's build(bug, **sizes), DIMS, BUGS -----------


def findings(t) -> tuple[str, ...]:
    """The kinds of a trace's errors and warnings, in order."""
    return tuple(d.kind for d in t.diagnostics if d.severity in ("error", "warning"))


def verdict_line(t) -> str:
    return t.report().verdict.line


def equal_sizes(dims: str) -> str:
    """``dims`` with B, T and H all 4 (``"B=2 T=6 D=32 H=4"`` -> ``"B=4 T=4 D=32 H=4"``)."""
    return " ".join(f"{k}=4" if k in ("B", "T", "H") else kv for kv in dims.split() for k in [kv.split("=")[0]])


def module_name(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[1]


def round_sizes(module: ModuleType) -> list[str]:
    """Each of a round module's DIMS, then the same at B = T = H = 4 (or the module's own equal-size reading
    of it, ``EQUAL[dims]``, where setting B, T and H to 4 alone would not make its sizes equal)."""
    return [d for dims in module.DIMS for d in (dims, getattr(module, "EQUAL", {}).get(dims, equal_sizes(dims)))]


def round_tests(modules: tuple[ModuleType, ...], expected: dict, equal_tested=None, missed=frozenset(),
                false_at_equal=frozenset(), warned=frozenset()) -> tuple[Callable, Callable, Callable]:
    """The three tests of a first-sight round, written once (as :func:`corpus_tests`): every variant of
    ``modules`` has its row in ``expected`` (``(module, variant) -> outcomes at round_sizes(module)``), each
    gets its outcomes, and no bug gets ``✓`` nor correct code ``✗``. A round module binds them:
    ``test_every_variant_is_expected, test_outcomes, test_no_check_mark_… = round_tests(MODULES, EXPECTED)``.

    ``equal_tested``: where given, only these rows are traced at equal sizes too (the suite's time is a budget:
    the others' equal-size outcomes stay in the table as measured once); ``missed``: bugs that keep ``✓``,
    named (value-level slips no name or contract decides); ``false_at_equal``: correct code still ``✗`` at equal
    sizes only, named with the reason in its module; ``warned``: correct code whose ``!`` is the honest outcome (a
    warning that says the code is right only under one reading the trace cannot tell from the other: GAT's heads
    averaged on purpose), named with the reason in its round's docstring."""

    def traced_sizes(module, bug):
        sizes = round_sizes(module)
        if equal_tested is None or (module, bug) in equal_tested:
            return sizes
        return [d for i, d in enumerate(sizes) if i % 2 == 0]   # (each DIMS, without its equal sizes)

    def test_every_variant_is_expected():
        assert set(expected) == {(m, bug) for m in modules for bug in ("", *m.BUGS, *m.TWINS)}

    @pytest.mark.parametrize(("module", "bug"), list(expected),
                             ids=[f"{m.__name__.rsplit('.', 1)[1]}-{b or 'ok'}" for m, b in expected])
    def test_outcomes(module, bug):
        traced = traced_sizes(module, bug)
        want = [o for d, o in zip(round_sizes(module), expected[(module, bug)]) if d in traced]
        assert [round_outcome(module, bug, dims) for dims in traced] == want

    def test_no_check_mark_on_a_bug_and_no_cross_on_correct_code():
        for (module, bug), outcomes in expected.items():
            marks = {mark for mark, _ in outcomes}
            if bug in module.BUGS:
                assert (module, bug) in missed or "✓" not in marks, (module.__name__, bug)
            elif (module, bug) in false_at_equal:
                distinct = {mark for (mark, _), d in zip(outcomes, round_sizes(module)) if d in module.DIMS}
                assert distinct <= {"✓", "?"}, (module.__name__, bug)
            else:
                allowed = {"✓", "?", "!"} if (module, bug) in warned else {"✓", "?"}
                assert marks <= allowed, (module.__name__, bug)
        assert all(key[1] in key[0].BUGS for key in missed)   # (named bugs, never correct code)
        assert not any(key[1] in key[0].BUGS for key in warned)   # (correct code, never a bug)

    return test_every_variant_is_expected, test_outcomes, test_no_check_mark_on_a_bug_and_no_cross_on_correct_code


def round_outcome(module: ModuleType, bug: str, dims: str, dependencies: bool = False,
                  built_inside: bool = False) -> tuple[str, tuple[str, ...]]:
    """``("raises", ())`` where the model raises untraced (any exception: torch itself then says the code is
    wrong; public8 flash_varlen's ``no-transpose-before-flash`` raises IndexError), else the traced verdict's
    first letter and the kinds of its errors and warnings (``dependencies``: :func:`traced_build`'s)."""
    accepted = inspect.signature(module.build).parameters
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split()) if k in accepted}
    model, inputs = module.build(bug, **sizes)
    try:
        with torch.no_grad():
            model(*inputs)
    except Exception:   # (torch's RuntimeError for sizes, IndexError for an index past an axis, ValueError...)
        return "raises", ()
    t = traced_build(module, bug, dims, dependencies, built_inside)
    return verdict_line(t)[0], findings(t)
