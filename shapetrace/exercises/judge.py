"""Judge a learner's function against the reference: the verdict and what exactly is wrong.

Imports torch; runs in the checker's child process. Order of checks, per input
case: did it raise (crash / out-of-memory / wrong exception), did it change its
input, is the result the right type, then exact shape and dtype (never
broadcast), then which element landed where, then the layout the exercise asks for.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from shapetrace.engine.layout import row_major
from shapetrace.exercises import inputs as inp
from shapetrace.exercises.calls import LoadFailure, Outcome, call, function_from_code, load_function
from shapetrace.exercises.content import Exercise
from shapetrace.exercises.explain_check import (
    crash_lines,
    diagnostics_of,
    in_place_line,
    layout_copies,
    learner_line_of,
    mutation_lines,
    name_shape,
    value_facts,
)


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
    reference_table: str = ""
    first_difference: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "not enough memory" in text


def same_tensor(a: torch.Tensor, b: torch.Tensor, exact: bool) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if exact or not (a.is_floating_point() or a.is_complex()):
        return bool(((a == b) | (a != a) & (b != b)).all()) if a.is_floating_point() else torch.equal(a, b)
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)


def same_value(a: Any, b: Any, exact: bool) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return same_tensor(a, b, exact)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return type(a) is type(b) and a == b


def same_outcome(a: Outcome, b: Outcome, exact: bool) -> bool:
    if a.raised or b.raised:
        return a.raised and b.raised and type(a.exc) is type(b.exc)
    return same_value(a.value, b.value, exact)


def _mutated(before: list[Any], after: list[Any]) -> int | None:
    for i, (x, y) in enumerate(zip(before, after)):
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.stride() != y.stride() or not same_tensor(x, y, exact=True):
                return i
    return None


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv}


def budget(expr: str, names: dict[str, int]) -> int:
    """Evaluate a byte budget such as ``"out_bytes"`` or ``"2 * out_bytes"`` (no Python eval)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"cannot evaluate {expr!r}")
    return int(ev(ast.parse(str(expr), mode="eval")))


class Judge:
    """Checks one learner file for one exercise."""

    def __init__(self, exercise: Exercise, path: str, width: int = 80, tables: Callable | None = None):
        self.ex, self.path, self.width = exercise, path, width
        self.tables = tables
        self.reference = load_function(str(exercise.solution), exercise.function)
        self.printed: tuple[str, int] | None = None

    def verdict(self, name: str, summary: str, **kw) -> Verdict:
        return Verdict(self.ex.id, name, summary, **kw)

    def run(self) -> Verdict:
        try:
            fn = load_function(self.path, self.ex.function)
        except LoadFailure as failure:
            return self._crash(failure.outcome, None, loading=True)
        for case in inp.cases(self.ex.inputs):
            found = self._case(fn, inp.build(self.ex.inputs, case))
            if found is not None:
                return found
        text, total = self.printed or ("", 0)
        return self.verdict("pass", f"{self.ex.id}: correct on every input case "
                            f"({', '.join(inp.cases(self.ex.inputs))} sizes)", output=text, output_total=total)

    # -- one case ---------------------------------------------------------------
    def _case(self, fn, inputs: inp.Inputs) -> Verdict | None:
        args = inputs.fresh()
        got = call(fn, args, inputs.names, inputs.dims, path=self.path)
        if self.printed is None:
            self.printed = (got.output, got.output_total)
        ref = call(self.reference, inputs.fresh(), inputs.names, inputs.dims)
        common = dict(case=inputs.case, sizes=inputs.describe(), output=got.output,
                      output_total=got.output_total, alloc_bytes=got.alloc_bytes)
        if got.raised:
            if ref.raised and isinstance(got.exc, type(ref.exc)):
                return None
            if is_oom(got.exc):
                return self.verdict("out-of-memory", "your function ran out of memory", line=_line(got),
                                    code=_code(got), explanation=[f"{type(got.exc).__name__}: "
                                    f"{str(got.exc)[:300]}"], **common)
            if ref.raised:
                return self._mismatch("wrong-values", got, ref, inputs, common, [
                    f"with {inputs.describe()} your function raised {type(got.exc).__name__}: {got.exc}; "
                    f"it should raise {type(ref.exc).__name__}: {ref.exc}"])
            return self._crash(got, inputs, common=common, ref=ref)
        if ref.raised:
            return self._mismatch("wrong-values", got, ref, inputs, common, [
                f"with {inputs.describe()} your function returned {_short(got.value)}; it should raise "
                f"{type(ref.exc).__name__}: {ref.exc}"])
        changed = _mutated(inputs.args, args)
        if changed is not None:
            line, code = in_place_line(got.trace, self.path)
            return self.verdict("mutated-input", f"your function changed its input (argument {changed + 1}) "
                                "in place", explanation=mutation_lines(inputs.args[changed], args[changed]) + [
                                    "an in-place op (a method ending in _, or an assignment into the tensor) "
                                    "changed the caller's tensor; work on a new tensor instead "
                                    "(masked_fill, not masked_fill_)"], line=line, code=code, **common)
        kind = self._type_problem(got.value)
        if kind:
            return self.verdict("not-a-tensor", kind, **common)
        return self._compare(got, ref, inputs, common, args)

    def _type_problem(self, value: Any) -> str:
        if self.ex.returns == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
            return "" if ok else f"your function returned {_short(value)}; it must return an int"
        if not isinstance(value, torch.Tensor):
            return (f"your function returned {_short(value)}, not a tensor"
                    + (" (did you forget `return`?)" if value is None else ""))
        return ""

    def _compare(self, got: Outcome, ref: Outcome, inputs: inp.Inputs, common: dict,
                 args: list) -> Verdict | None:
        g, r = got.value, ref.value
        if isinstance(g, torch.Tensor):
            if tuple(g.shape) != tuple(r.shape):
                lines = [f"your output has shape {name_shape(g.shape, inputs)}; expected "
                         f"{name_shape(r.shape, inputs, self.ex.output_names)} "
                         f"(the input case: {inputs.describe()})"]
                return self._mismatch("wrong-shape", got, ref, inputs, common, lines)
            if g.dtype != r.dtype:
                return self._mismatch("wrong-dtype", got, ref, inputs, common, [
                    f"your output's dtype is {str(g.dtype)[6:]}; expected {str(r.dtype)[6:]}"])
        if not same_value(g, r, exact=self.ex.movement):
            return self._mismatch("wrong-values", got, ref, inputs, common, value_facts(
                g, r, inputs, self.ex.movement)["lines"])
        return self._layout(got, ref, inputs, common, args)

    def _layout(self, got: Outcome, ref: Outcome, inputs: inp.Inputs, common: dict,
                args: list) -> Verdict | None:
        out, checks = got.value, self.ex.checks
        if not isinstance(out, torch.Tensor):
            return None
        first = next(a for a in args if isinstance(a, torch.Tensor))
        problems = []
        if checks.get("must_be_view") and _storage(out) != _storage(first):
            problems.append("your result is a copy, but this exercise asks for a view of the input "
                            "(no data moved):")
            problems += layout_copies(got.trace) or ["  a new tensor was built from the input"]
        if checks.get("must_be_contiguous") and not out.is_contiguous():
            problems.append(f"your result is not contiguous: strides {tuple(out.stride())} are not the "
                            f"row-major {row_major(out.shape)} this exercise asks for")
        if checks.get("max_alloc_bytes"):
            names = dict(out_bytes=out.numel() * out.element_size(),
                         in_bytes=first.numel() * first.element_size())
            limit = budget(checks["max_alloc_bytes"], names)
            if got.alloc_bytes > limit:
                problems.append(f"your function allocated {got.alloc_bytes:,} bytes; at most {limit:,} "
                                f"are allowed ({checks['max_alloc_bytes']} here):")
                problems += layout_copies(got.trace, allocs=True)
        if problems:
            return self._mismatch("layout", got, ref, inputs, common, problems)
        return None

    # -- explanations -----------------------------------------------------------
    def _tables(self, mine, ref) -> dict:
        return self.tables(mine, ref, self.width) if self.tables is not None else {}

    def _match_mistake(self, got: Outcome, inputs: inp.Inputs):
        for m in self.ex.mistakes:
            try:
                fn = function_from_code(m.code, self.ex.function)
            except Exception:  # a broken mistake entry is a content bug; the content tests catch it
                continue
            theirs = call(fn, inputs.fresh(), inputs.names, inputs.dims, traced=False)
            if same_outcome(got, theirs, exact=self.ex.movement):
                return m
        return None

    def _mismatch(self, name: str, got: Outcome, ref: Outcome, inputs: inp.Inputs, common: dict,
                  lines: list[str]) -> Verdict:
        mistake = self._match_mistake(got, inputs)
        facts = value_facts(got.value, ref.value, inputs, self.ex.movement) if not got.raised else {}
        explanation = list(lines)
        summary = lines[0] if lines else name
        if mistake is not None:
            summary = mistake.explain.strip().format_map(_Facts(facts, inputs))
            explanation = explanation
        tables = self._tables(got.trace, ref.trace)
        line, code = _line(got), _code(got)
        if line is None:
            line, code = learner_line_of(got.trace, ref.trace, self.path)
        return self.verdict(name, summary, explanation=explanation, mistake=mistake.id if mistake else None,
                            diagnostics=diagnostics_of(got.trace), line=line, code=code,
                            **tables, **common)

    def _crash(self, got: Outcome, inputs: inp.Inputs | None, common: dict | None = None,
               loading: bool = False, ref: Outcome | None = None) -> Verdict:
        common = common or dict(output=got.output, output_total=got.output_total)
        exc = got.exc
        head = f"{type(exc).__name__}: {exc}"
        where = "while loading your file" if loading else f"with {inputs.describe()}"
        lines = crash_lines(got.trace)
        mistake = self._match_mistake(got, inputs) if inputs is not None else None
        summary = f"your function raised {head.splitlines()[0]}"
        if mistake is not None:
            summary = mistake.explain.strip().format_map(_Facts({}, inputs))
        tables = self._tables(got.trace, ref.trace if ref else None) if inputs else {}
        return self.verdict("crash", summary, explanation=[f"{where}: {head}"] + lines,
                            mistake=mistake.id if mistake else None, line=_line(got), code=_code(got),
                            diagnostics=diagnostics_of(got.trace), **tables, **common)


class _Facts(dict):
    """Template values for a mistake's explanation; unknown fields stay visible as {name}."""

    def __init__(self, facts: dict, inputs: inp.Inputs | None):
        super().__init__(facts)
        if inputs is not None:
            self.update(sizes=inputs.describe(), **{k: v for k, v in inputs.sizes.items()})

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()




def _line(o: Outcome) -> int | None:
    return o.frame[0] if o.frame else None


def _code(o: Outcome) -> str:
    return o.frame[1] if o.frame else ""


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    if isinstance(value, (tuple, list)):
        kinds = ", ".join(_short(v) if isinstance(v, torch.Tensor) else type(v).__name__ for v in value[:3])
        return f"a {type(value).__name__} ({kinds})"
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


def judge(exercise: Exercise, path: str, width: int = 80, tables: Callable | None = None) -> Verdict:
    """The verdict for the learner file at ``path``.

    ``tables(learner_trace, reference_trace, width)`` may add rendered trace tables
    (the runner passes the Rich renderer; the engine itself never imports Rich).
    """
    return Judge(exercise, path, width, tables).run()
