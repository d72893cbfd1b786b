"""Judge a learner's function from plain data: the verdict and what exactly is wrong, observably.

Runs in the parent, which never imports the learner's code. The child reports what the function did
(:class:`Learned`: its value, the arguments after the call, and explanatory facts); the parent runs the
reference and the known mistakes itself, on the same inputs, and compares. Order of checks, per input
case: did it raise (and was that the right exception, naming the numbers), did it change its input,
is the result the right type, then exact shape and dtype (never broadcast), then which element landed
where, then the layout the exercise asks for. After every case, a memory budget (``max_alloc_bytes``) is
judged from the large input of :mod:`.probe`: the kernel capped the child, the parent checks the bytes;
the child's own allocation count only explains. A verdict says what is wrong, never how to fix it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from shapetrace.engine.layout import row_major
from shapetrace.exercises import inputs as inp
from shapetrace.exercises.calls import Outcome, call, function_from_code
from shapetrace.exercises.content import Exercise
from shapetrace.exercises.explain_check import and_list, mutation_lines, name_shape, value_facts
from shapetrace.exercises.plain import MAX_DIMS, MAX_TENSOR_BYTES, Unsendable
from shapetrace.exercises.probe import SLACK_BYTES, mib


@dataclass
class Verdict:
    """The checker's answer for one file (plain data; ``to_dict`` is what ``--json`` prints)."""

    exercise: str
    verdict: str
    summary: str
    explanation: list[str] = field(default_factory=list)
    case: str = ""
    sizes: str = ""
    mistake: str | None = None
    line: int | None = None
    code: str = ""
    diagnostics: list[dict] = field(default_factory=list)
    output: str = ""
    output_total: int = 0
    alloc_bytes: int | None = None
    table: str = ""
    #: For a timeout, what stopped the code: "alarm" (the child's own timer), "deadline" (the parent killed
    #: the child at its deadline) or "cpu-limit" (the kernel's CPU-time limit); "" otherwise.
    stopped_by: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Learned:
    """What the child reported about one call (or the loading) of the learner's function: plain data."""

    value: Any = None
    args: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    @property
    def exc(self) -> dict | None:
        exc = self.facts.get("exc")
        return exc if isinstance(exc, dict) else None

    @property
    def raised(self) -> bool:
        return self.exc is not None

    @property
    def timed_out(self) -> bool:
        return bool(self.exc and self.exc.get("timed_out"))

    @property
    def head(self) -> str:
        e = self.exc or {}
        if e.get("unshown"):  # its __str__ raised: the type, and why its message is missing
            return f"{e.get('type', 'Exception')} (its message could not be shown: {e['unshown']})"
        return f"{e.get('type', 'Exception')}: {e.get('message', '')}".rstrip(": ") if e else ""

    def is_a(self, name: str) -> bool:
        return bool(self.exc) and name in (self.exc.get("mro") or [])

    @property
    def frame(self) -> tuple[int | None, str]:
        f = self.facts.get("frame")
        if isinstance(f, list) and len(f) == 2 and isinstance(f[0], int):
            return f[0], str(f[1])
        return None, ""

    def common(self) -> dict:
        return dict(output=str(self.facts.get("output", ""))[:4000], output_total=int(self.facts.get("output_total",
                    0) or 0), alloc_bytes=self.facts.get("alloc_bytes"))


def is_oom_text(text: str) -> bool:
    return "can't allocate memory" in text or "not enough memory" in text or text.startswith("MemoryError")


def same_tensor(a: torch.Tensor, b: torch.Tensor, exact: bool) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if exact or not (a.is_floating_point() or a.is_complex()):
        return bool(((a == b) | (a != a) & (b != b)).all()) if a.is_floating_point() else torch.equal(a, b)
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)


def same_value(a: Any, b: Any, exact: bool) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):   # several results (a backward's grads)
        return len(a) == len(b) and all(same_value(x, y, exact) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return type(a) is torch.Tensor and type(b) is torch.Tensor and same_tensor(a, b, exact)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return type(a) is type(b) and a == b


def _mutated(before: list[Any], after: list[Any]) -> int | None:
    for i, x in enumerate(before):
        if isinstance(x, torch.Tensor):
            y = after[i] if i < len(after) else None
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.stride() != y.stride() \
                    or not same_tensor(x, y, exact=True):
                return i
    return None


def names_numbers(message: str, numbers: list[int]) -> bool:
    """Whether every number appears in ``message`` as a whole number."""
    found = {int(n) for n in re.findall(r"(?<![\d.])\d+(?![\d.]*\d)", message)}
    return all(n in found for n in numbers)


def short(value: Any) -> str:
    """``a tensor of shape [2, 3]``; a tensor is told by its type (a ``__class__`` property can claim one)."""
    if issubclass(type(value), torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    if isinstance(value, (tuple, list)):
        kinds = ", ".join(short(v) if issubclass(type(v), torch.Tensor) else type(v).__name__ for v in value[:3])
        return f"a {type(value).__name__} ({kinds})"
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


class Judge:
    """Decides the verdict of one learner file for one exercise, from what the child reported."""

    #: The large-input memory probe (:mod:`.probe`) of an exercise with ``max_alloc_bytes``.
    probe = None

    def __init__(self, exercise: Exercise, path: str, cases: list[inp.Inputs], source: str = ""):
        self.ex, self.path, self.cases, self.source = exercise, path, cases, source
        self.reference = exercise.reference_function()   # autograd itself, for a backward written by hand
        self.solution = exercise.solution_function()     # whose ops a wrong answer's line is compared with
        self.printed: tuple[str, int] | None = None

    def verdict(self, name: str, summary: str, **kw) -> Verdict:
        return Verdict(self.ex.id, name, summary, **kw)

    # -- whole file -------------------------------------------------------------
    def loading_failed(self, got: Learned) -> Verdict:
        line, code = got.frame
        if got.timed_out:
            return self.timeout(line, code, got.common(), loading=True)
        head = got.head
        first = head.splitlines()[0] if head else ""
        if first.startswith(("SyntaxError", "IndentationError", "TabError")):
            summary = f"your file is not valid Python, so nothing was checked: {first}"
        elif first:
            summary = f"your file raised {first} while loading, before your function was called"
        else:
            summary = "your file could not be loaded"
        return self.verdict("crash", summary, explanation=[f"while loading your file: {head}"],
                            line=line, code=code, **got.common())

    def timeout(self, line: int | None, code: str, common: dict, limit: float | None = None,
                loading: bool = False, **kw) -> Verdict:
        kw.setdefault("stopped_by", "alarm")
        what = "your file" if loading else "your function"
        seconds = f" for more than {limit:g} s" if limit else " past the time limit"
        return self.verdict("timeout", f"{what} ran{seconds} and was stopped",
                            explanation=["an endless loop, or work that grows much faster than the inputs; "
                                         "the checker's inputs are tiny, so a correct answer takes milliseconds"],
                            line=line, code=code, **common, **kw)

    def passed(self) -> Verdict:
        kinds = ", ".join(dict.fromkeys(c.case for c in self.cases))
        text, total = self.printed or ("", 0)
        memory = f", and fits in {_allowed(self.probe)} on a large input" if self.probe is not None else ""
        return self.verdict("pass", f"{self.ex.id}: correct on all {len(self.cases)} random input cases "
                            f"({kinds} sizes){memory}", output=text, output_total=total)

    # -- one case ---------------------------------------------------------------
    def case(self, inputs: inp.Inputs, got: Learned, limit: float | None = None) -> Verdict | None:
        """The verdict of one case, or None when the learner's function got it right."""
        if self.printed is None:
            self.printed = (str(got.facts.get("output", ""))[:4000], int(got.facts.get("output_total", 0) or 0))
        ctx = dict(case=inputs.case, sizes=inputs.describe(), **got.common())
        if self.ex.autograd and got.facts.get("autograd"):
            return self.uses_autograd(got.facts["autograd"], ctx)
        if got.timed_out:
            line, code = got.frame
            return self.timeout(line, code, got.common(), limit, case=inputs.case, sizes=inputs.describe())
        # the reference's values, untraced: a verdict that shows ops traces it again (_mismatch)
        ref = call(self.reference, inputs.fresh(), inputs.names, inputs.dims, traced=False)
        if got.raised or ref.raised:
            return self._exceptions(got, ref, inputs, ctx)
        changed = _mutated(inputs.args, got.args)
        swapped = got.facts.get("swapped")
        if changed is None and isinstance(swapped, list) and swapped and type(swapped[0]) is int:
            changed = swapped[0] if 0 <= swapped[0] < len(inputs.args) else 0  # set_(): new memory, same values
        if changed is not None:
            line, code = (got.facts.get("in_place") or [None, ""])[:2]
            return self.verdict("mutated-input", f"your function changed its input (argument {changed + 1}) "
                                "in place", explanation=mutation_lines(inputs.args[changed], got.args[changed]),
                                line=line, code=code, **ctx)
        kind = self._type_problem(got)
        if kind:
            return self.verdict("not-a-tensor", kind, **ctx)
        return self._compare(got, ref, inputs, ctx)

    def uses_autograd(self, used: list, ctx: dict) -> Verdict:
        """A backward by hand that asked autograd (:mod:`.autograd_watch` saw it): its grads are autograd's."""
        line, code, what = used
        grads = and_list(self.ex.parts) if self.ex.parts else "the grad"
        return self.verdict("uses-autograd", f"your function uses autograd: it {what}; write {grads} by hand, "
                            "from the incoming grad", line=line, code=code, explanation=[
                                "the checker compares your grads with autograd's, so grads autograd computed "
                                "prove nothing: this exercise is the backward itself, from the forward's "
                                "tensors and dy (matmuls, transposes, sums)"], **ctx)

    def _exceptions(self, got: Learned, ref: Outcome, inputs: inp.Inputs, ctx: dict) -> Verdict | None:
        if got.raised and ref.raised:
            want = type(ref.exc).__name__
            if not got.is_a(want):
                return self._mismatch("wrong-values", got, inputs, ctx, [
                    f"with {inputs.describe()} your function raised {got.head}; "
                    f"it should raise {want}, with a message that names {_numbers_text(inputs)}"])
            numbers = [a for a in inputs.args if type(a) is int]
            if not names_numbers(str(got.exc.get("message", "")), numbers):
                return self._mismatch("wrong-values", got, inputs, ctx, [
                    f"with {inputs.describe()} your function raised {want}, but its message "
                    f"({str(got.exc.get('message', ''))!r}) does not name {_numbers_text(inputs)}"])
            return None
        if ref.raised:
            return self._mismatch("wrong-values", got, inputs, ctx, [
                f"with {inputs.describe()} your function returned {got.facts.get('short', short(got.value))}; "
                f"it should raise {type(ref.exc).__name__}"])
        head = got.head
        if is_oom_text(head):
            line, code = got.frame
            return self.verdict("out-of-memory", "your function ran out of memory", line=line, code=code,
                                explanation=[head[:300]], **ctx)
        return self._crash(got, inputs, ctx)

    def _type_problem(self, got: Learned) -> str:
        value, described = got.value, str(got.facts.get("short", ""))
        if self.ex.returns == "int":
            ok = type(value) is int
            return "" if ok else f"your function returned {described or short(value)}; it must return an int"
        if self.ex.parts:
            return _parts_problem(value, described, self.ex.parts)
        if unread_tensor(value):
            return f"your function returned a {unread_tensor(value)}, which the checker cannot read back: {READS}"
        if type(value) is not torch.Tensor:
            none = got.facts.get("type") == "NoneType"
            return (f"your function returned {described or short(value)}, not a tensor"
                    + (" (did you forget `return`?)" if none else ""))
        return ""

    def _compare(self, got: Learned, ref: Outcome, inputs: inp.Inputs, ctx: dict) -> Verdict | None:
        if self.ex.parts:
            return self._compare_parts(got, ref, inputs, ctx)
        g, r = got.value, ref.value
        if isinstance(g, torch.Tensor) and isinstance(r, torch.Tensor):
            if tuple(g.shape) != tuple(r.shape):
                return self._mismatch("wrong-shape", got, inputs, ctx, [
                    f"your output has shape {name_shape(g.shape, inputs)}; expected "
                    f"{name_shape(r.shape, inputs, self.ex.output_names)} (the input case: {inputs.describe()})"])
            if g.dtype != r.dtype:
                return self._mismatch("wrong-dtype", got, inputs, ctx, [
                    f"your output's dtype is {str(g.dtype)[6:]}; expected {str(r.dtype)[6:]}"])
        if not same_value(g, r, exact=self.ex.movement):
            return self._mismatch("wrong-values", got, inputs, ctx,
                                  value_facts(g, r, inputs, self.ex.movement)["lines"])
        return self._layout(got, inputs, ctx)

    def _compare_parts(self, got: Learned, ref: Outcome, inputs: inp.Inputs, ctx: dict) -> Verdict | None:
        """A function that returns several tensors (``dq, dk, dv``): the first one that is wrong, by name,
        and which of the others are right."""
        names, wanted = self.ex.parts, self.ex.output_names.split(";")
        right = [n for n, a, b in zip(names, got.value, ref.value) if same_value(a, b, self.ex.movement)]
        others = f"; {and_list(right)} {'is' if len(right) == 1 else 'are'} right" if right else ""
        for i, (name, g, r) in enumerate(zip(names, got.value, ref.value)):
            if tuple(g.shape) != tuple(r.shape):
                return self._mismatch("wrong-shape", got, inputs, ctx, [
                    f"your {name} has shape {name_shape(g.shape, inputs)}; expected "
                    f"{name_shape(r.shape, inputs, wanted[i] if i < len(wanted) else '')} "
                    f"(the input case: {inputs.describe()}){others}"])
            if g.dtype != r.dtype:
                return self._mismatch("wrong-dtype", got, inputs, ctx, [
                    f"your {name}'s dtype is {str(g.dtype)[6:]}; expected {str(r.dtype)[6:]}{others}"])
            if not same_value(g, r, exact=self.ex.movement):
                lines = value_facts(g, r, inputs, self.ex.movement)["lines"]
                lines = [line.replace("out[", f"{name}[", 1) for line in lines]
                return self._mismatch("wrong-values", got, inputs, ctx, [f"your {name} is wrong{others}"] + lines)
        return None

    def _layout(self, got: Learned, inputs: inp.Inputs, ctx: dict) -> Verdict | None:
        out, checks = got.value, self.ex.checks
        if not isinstance(out, torch.Tensor):
            return None
        at = next(i for i, a in enumerate(inputs.args) if isinstance(a, torch.Tensor))
        first = got.args[at]
        problems = []
        if checks.get("must_be_view") and not _views(out, first, inputs.args[at]):
            problems.append("your result is a copy, but this exercise asks for a view of the input "
                            "(no data moved):")
            problems += list(got.facts.get("copies") or []) or ["  a new tensor was built from the input"]
        if checks.get("must_be_contiguous") and not out.is_contiguous():
            problems.append(f"your result is not contiguous: strides {tuple(out.stride())} are not the "
                            f"row-major {row_major(out.shape)} this exercise asks for")
        if problems:
            return self._mismatch("layout", got, inputs, ctx, problems)
        return None

    # -- the large input (memory) ------------------------------------------------
    def large(self, got: Learned, small: Learned, limit: float | None = None) -> Verdict | None:
        """The verdict of the memory probe, judged after every small case passed (None: it fitted)."""
        probe = self.probe
        ctx = dict(case=probe.inputs.case, sizes=probe.inputs.describe())
        line, code = got.frame
        if got.timed_out:
            return self.timeout(line, code, {}, limit, **ctx)
        if got.raised and is_oom_text(got.head):
            return self.verdict("layout", f"your function needs more memory than {_allowed(probe)}: given a "
                                f"large input ({probe.inputs.describe()}) it ran out of memory, so it makes at "
                                "least one extra copy", explanation=self._memory_lines(small),
                                line=line, code=code, **ctx)
        if got.raised:
            return self.verdict("crash", f"with a large input ({probe.inputs.describe()}) your function raised "
                                f"{got.head.splitlines()[0]}", explanation=[got.head[:300]], line=line, code=code,
                                **ctx)
        return self._large_value(got, probe, ctx)

    def _large_value(self, got: Learned, probe, ctx: dict) -> Verdict | None:
        want, value = probe.expected, got.value
        where = f"with a large input ({probe.inputs.describe()})"
        if not isinstance(value, torch.Tensor):
            shape, dtype = got.facts.get("shape"), got.facts.get("dtype")
            what = (f"a {dtype} tensor of shape {shape}" if shape is not None else
                    "output the checker could not read back" if got.facts.get("unreadable") else
                    str(got.facts.get("short") or "no tensor"))
            return self.verdict("wrong-values", f"{where} your function returned {what}; expected a "
                                f"{str(want.dtype)[6:]} tensor of shape {list(want.shape)}", **ctx)
        if value.shape != want.shape or value.dtype != want.dtype:   # (a forged raw frame: never broadcast)
            return self.verdict("wrong-values", f"{where} your function returned a {str(value.dtype)[6:]} tensor "
                                f"of shape {list(value.shape)}; expected a {str(want.dtype)[6:]} tensor of shape "
                                f"{list(want.shape)}", **ctx)
        if not torch.equal(value, want) and not same_tensor(value, want, exact=self.ex.movement):
            bad = tuple(int(i) for i in ((value != want) & ~(value.isnan() & want.isnan())).nonzero()[0]) \
                if value.is_floating_point() else tuple(int(i) for i in (value != want).nonzero()[0])
            return self.verdict("wrong-values", f"{where} your output differs from the expected one: "
                                f"out{list(bad)} is {value[bad].item():g}; expected {want[bad].item():g}", **ctx)
        return None

    def _memory_lines(self, small: Learned) -> list[str]:
        probe = self.probe
        lines = [f"the input holds {mib(probe.in_bytes)} and the output {mib(probe.out_bytes)}; this exercise "
                 f"allows {mib(probe.allow)} ({probe.expr}), and the checker gave your function "
                 f"{mib(SLACK_BYTES)} more for Python itself: an extra copy of the input or of the output "
                 "does not fit"]
        traced = [str(x) for x in small.facts.get("allocs") or []]
        if traced:
            lines.append("what your function allocated on a small input (traced):")
            lines += traced
        return lines

    # -- explanations -----------------------------------------------------------
    def _match_mistake(self, got: Learned, inputs: inp.Inputs):
        for m in self.ex.mistakes:
            try:
                fn = function_from_code(m.code, self.ex.function)
            except Exception:  # a broken mistake entry is a content bug; the content tests catch it
                continue
            theirs = call(fn, inputs.fresh(), inputs.names, inputs.dims, traced=got.raised)
            if _same_outcome(got, theirs, exact=self.ex.movement):
                return m
        return None

    def _mismatch(self, name: str, got: Learned, inputs: inp.Inputs, ctx: dict, lines: list[str]) -> Verdict:
        mistake = self._match_mistake(got, inputs)
        ref = call(self.reference, inputs.fresh(), inputs.names, inputs.dims)
        facts = self._value_facts(got.value, ref.value, inputs) if not got.raised else {}
        summary = lines[0] if lines else name
        if mistake is not None:
            summary = mistake.explain.strip().format_map(_Facts(facts, inputs))
        line, code = got.frame
        if mistake is not None and mistake.where:
            line, code = find_line(self.source, mistake.where) or (line, code)
        if line is None:
            shown = ref if self.solution is self.reference else call(self.solution, inputs.fresh(), inputs.names,
                                                                     inputs.dims)
            line, code = self._learner_line(got, shown)
        return self.verdict(name, summary, explanation=list(lines), mistake=mistake.id if mistake else None,
                            diagnostics=_diagnostics(got), line=line, code=code,
                            table=str(got.facts.get("table", "")), **ctx)

    def _value_facts(self, got: Any, want: Any, inputs: inp.Inputs) -> dict:
        """:func:`value_facts` of the result, or of the first of several that differs (its ``cell`` named
        after it: ``dk[2, 0]``)."""
        name = "out"
        if self.ex.parts and isinstance(got, (tuple, list)) and isinstance(want, (tuple, list)):
            name, got, want = next(((n, g, w) for n, g, w in zip(self.ex.parts, got, want)
                                    if not same_value(g, w, self.ex.movement)), (name, got, want))
        facts = value_facts(got, want, inputs, self.ex.movement)
        if "cell" in facts:
            facts["cell"] = name + facts["cell"].removeprefix("out")
        return facts

    def _crash(self, got: Learned, inputs: inp.Inputs, ctx: dict) -> Verdict:
        head = got.head
        mistake = self._match_mistake(got, inputs)
        summary = f"your function raised {head.splitlines()[0]}"
        if mistake is not None:
            summary = mistake.explain.strip().format_map(_Facts({}, inputs))
        line, code = got.frame
        if mistake is not None and mistake.where:
            line, code = find_line(self.source, mistake.where) or (line, code)
        lines = [str(x) for x in got.facts.get("crash_lines") or []]
        return self.verdict("crash", summary, explanation=[f"with {inputs.describe()}: {head}"] + lines,
                            mistake=mistake.id if mistake else None, line=line, code=code,
                            diagnostics=_diagnostics(got), table=str(got.facts.get("table", "")), **ctx)

    def _learner_line(self, got: Learned, ref: Outcome) -> tuple[int | None, str]:
        from shapetrace.exercises.facts import event_key

        mine = [e for e in got.facts.get("events") or [] if isinstance(e, dict)]
        theirs = [event_key(e) for e in ref.trace.events] if ref.trace is not None else []
        return learner_line(mine, theirs, self.path)


_COMPARED = ("op", "shape", "dims", "error", "args")


def learner_line(mine: list[dict], theirs: list[dict], path: str) -> tuple[int | None, str]:
    """The learner's line of the first traced op that differs from the reference's (else the last op)."""

    if not mine:
        return None, ""
    k = next((i for i, (a, b) in enumerate(zip(mine, theirs))
              if tuple(a.get(f) for f in _COMPARED) != tuple(b.get(f) for f in _COMPARED)), len(mine) - 1)
    event = mine[min(k, len(mine) - 1)]
    file, _, line = str(event.get("source", "")).rpartition(":")
    same = file == path or (file and Path(file).resolve() == Path(path).resolve())
    return (int(line), str(event.get("code", ""))) if same and line.isdigit() else (None, "")


def _failed_operands(events: list[dict]) -> list | None:
    failed = [e for e in events if isinstance(e, dict) and e.get("error")]
    return failed[-1].get("inputs") if failed else None


def _same_outcome(got: Learned, theirs: Outcome, exact: bool) -> bool:
    """Same value; or the same exception, message, and operand shapes of the op that raised."""
    if got.raised or theirs.raised:
        if not (got.raised and theirs.raised and got.exc.get("type") == type(theirs.exc).__name__
                and got.exc.get("message") == str(theirs.exc)):
            return False
        from shapetrace.exercises.facts import event_key

        mine = _failed_operands(got.facts.get("events") or [])
        ref = _failed_operands([event_key(e) for e in theirs.trace.events] if theirs.trace is not None else [])
        return mine == ref
    return same_value(got.value, theirs.value, exact)


def find_line(source: str, pattern: str) -> tuple[int, str] | None:
    """The first line of ``source`` (code, not a comment) that matches ``pattern``."""
    for n, text in enumerate(source.splitlines(), 1):
        code = text.split("#")[0]
        if re.search(pattern, code):
            return n, text.strip()
    return None


#: what a verdict shows of a tracer diagnostic: what is wrong (its ``message``), never its ``fix``
VERDICT_DIAGNOSTIC_KEYS = ("severity", "kind", "event", "message")


def _diagnostics(got: Learned) -> list[dict]:
    """The tracer's diagnostics, minus those about an op that raised (the crash says more), without their fix."""
    raised = {e.get("index") for e in got.facts.get("events") or [] if isinstance(e, dict) and e.get("error")}
    return [{k: d.get(k) if k != "message" else str(d[k]) for k in VERDICT_DIAGNOSTIC_KEYS}
            for d in got.facts.get("diagnostics") or []
            if isinstance(d, dict) and d.get("event") not in raised and d.get("message")]


#: What comes back from the child as a tensor (:mod:`.plain`), for a verdict about one that did not.
READS = (f"it reads back strided CPU tensors of float, int or bool dtypes, with up to {MAX_DIMS} axes and "
         f"{MAX_TENSOR_BYTES >> 20} MiB of memory in all")


def unread_tensor(value: Any) -> str:
    """``float32 tensor on the meta device`` for a tensor the child could not send (:mod:`.plain` said why in
    its place), else ""."""
    name = value.type_name if isinstance(value, Unsendable) else ""
    found = re.fullmatch(r"tensor (\S+)(.*)", name)
    return f"{found[1]} tensor{found[2]}" if found else ""


def _parts_problem(value: Any, described: str, parts: tuple[str, ...]) -> str:
    """Why ``value`` is not the tuple of ``len(parts)`` tensors the exercise asks for ("" when it is)."""
    if isinstance(value, (tuple, list)) and len(value) == len(parts):
        if all(type(v) is torch.Tensor for v in value):
            return ""
        unread = next(((n, unread_tensor(v)) for n, v in zip(parts, value) if unread_tensor(v)), None)
        if unread is not None:
            return f"your {unread[0]} is a {unread[1]}, which the checker cannot read back: {READS}"
    return (f"your function returned {described or short(value)}; it must return {len(parts)} tensors, "
            f"{', '.join(parts)}")


def _allowed(probe) -> str:
    return {"out_bytes": "its output", "in_bytes": "its input"}.get(probe.expr.replace(" ", ""),
                                                                     f"{probe.expr} bytes")


def _numbers_text(inputs: inp.Inputs) -> str:
    items = [f"{k} = {v}" for k, v in inputs.sizes.items() if type(v) is int]
    return " and ".join(items)


class _Facts(dict):
    """Template values for a mistake's explanation; unknown fields stay visible as {name}."""

    def __init__(self, facts: dict, inputs: inp.Inputs | None):
        super().__init__(facts)
        if inputs is not None:
            self.update(sizes=inputs.describe(), **{k: v for k, v in inputs.sizes.items()})

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _views(out: torch.Tensor, arg: torch.Tensor, original: torch.Tensor) -> bool:
    """``out`` shares the memory of the argument, which is no bigger than the input the parent sent."""
    same = out.untyped_storage().data_ptr() == arg.untyped_storage().data_ptr()
    return same and arg.untyped_storage().nbytes() == original.untyped_storage().nbytes()
