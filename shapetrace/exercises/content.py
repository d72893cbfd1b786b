"""Load and validate the curriculum in ``lessons/`` (TOML + Markdown; no torch).

Layout::

    lessons/index.toml                    [[lessons]] number, dir, title, summary, exercises
    lessons/quiz.toml                     question templates for ``shapetrace quiz``
    lessons/NN_topic/lesson.md            the lesson text
    lessons/NN_topic/<id>/exercise.toml   metadata: function, inputs, checks, hints, mistakes
    lessons/NN_topic/<id>/starter.py      a plausible wrong implementation
    lessons/NN_topic/<id>/solution.py     the reference solution
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import tomllib

from shapetrace.errors import UsageError
from shapetrace.exercises.where import lessons_root

#: Verdicts the checker can give (``pass`` is the only success).
VERDICTS = ("pass", "wrong-shape", "wrong-dtype", "wrong-values", "crash", "timeout",
            "out-of-memory", "not-a-tensor", "mutated-input", "layout", "gave-up",
            "misses-mutants", "rejects-reference", "unverified", "uses-autograd")
#: Exercise kinds: write a function (checked against the reference), or write a test (run against the
#: reference, which it must pass, and against broken versions, each of which it must fail).
KINDS = ("function", "test")
#: Input builders the checker knows (see ``inputs.py``).
BUILDERS = ("tokens", "heads", "heads_pair", "scores", "padding", "padding_empty", "cross", "kv_heads", "qkv",
            "sizes", "params", "kv_cache", "decode", "image", "cls", "rope", "rope_pairs", "token_major",
            "sdpa_padding", "head_grads", "linear_grads", "kv_grads",
            "heads_grad")
CHECK_KEYS = ("must_be_view", "must_be_contiguous", "max_alloc_bytes")


class ContentError(UsageError):
    """The lesson content itself is malformed (a bug in lessons/, not in the learner's code)."""


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant: code that reproduces it and the explanation a learner gets."""

    id: str
    explain: str
    code: str
    where: str = ""  # a regex for the learner's line to point at (the mask line, not the softmax after it)


@dataclass(frozen=True)
class Mutant:
    """A broken implementation a learner's test must catch: what it does, and why a test misses it."""

    id: str
    does: str
    missed: str
    code: str


@dataclass(frozen=True)
class Exercise:
    """One exercise: what to implement, how it is checked, hints and known mistakes."""

    id: str
    title: str
    function: str
    task: str
    inputs: str
    lesson: int
    folder: Path
    starter_verdict: str
    starter_mistake: str | None
    hints: tuple[str, ...]
    mistakes: tuple[Mistake, ...]
    checks: dict = field(default_factory=dict)
    returns: str = "tensor"
    #: a function that returns several tensors (a backward's ``dq, dk, dv``): their names, in order
    parts: tuple[str, ...] = ()
    output_names: str = ""
    movement: bool = False
    kind: str = "function"
    subjects: tuple[str, ...] = ()  # test kind: the implementations the learner's test receives, in order
    reference_code: str = ""  # test kind: the correct implementations (code defining every subject)
    mutants: tuple[Mutant, ...] = ()
    #: per hint, the verdicts and mistake ids it is about (``()``: any fault); see app/hints.py
    hints_for: tuple[tuple[str, ...], ...] = ()
    #: a backward written by hand is judged against autograd: this code defines ``function`` with the
    #: learner's arguments, computing its answer with ``torch.autograd`` ("": judged against the solution)
    autograd: str = ""

    @property
    def starter(self) -> Path:
        return self.folder / "starter.py"

    @property
    def solution(self) -> Path:
        return self.folder / "solution.py"

    def reference_function(self):
        """What the checker compares the learner's results with: autograd's answer where the exercise gives
        one (``autograd`` in its exercise.toml), else the solution; compiled, as the solution is, from the
        very bytes checked against their digest."""
        if not self.autograd:
            return self.solution_function()
        from shapetrace.exercises.calls import function_from_code
        from shapetrace.exercises.digests import verified_text

        text = verified_text(self.folder / "exercise.toml", self.lessons_root)
        return function_from_code(tomllib.loads(text)["autograd"], self.function)

    @property
    def lessons_root(self) -> Path:
        """The lessons folder this exercise was loaded from (``lessons/NN_topic/<id>``)."""
        return self.folder.parent.parent

    def solution_function(self):
        """The reference solution's function, compiled from the bytes checked against their digest."""
        from shapetrace.exercises.calls import function_from_file
        from shapetrace.exercises.digests import verified_text

        return function_from_file(verified_text(self.solution, self.lessons_root), str(self.solution), self.function)

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "lesson": self.lesson, "function": self.function,
                "kind": self.kind, "inputs": self.inputs, "checks": dict(self.checks), "hints": len(self.hints)}


@dataclass(frozen=True)
class Lesson:
    """One lesson: its number, title, text file and exercise ids (in order)."""

    number: int
    title: str
    summary: str
    folder: Path
    exercises: tuple[str, ...]
    topics: tuple[str, ...] = ()

    @property
    def text_path(self) -> Path:
        return self.folder / "lesson.md"

    def text(self) -> str:
        return self.text_path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Curriculum:
    """Every lesson and exercise, in teaching order."""

    root: Path
    lessons: tuple[Lesson, ...]
    exercises: tuple[Exercise, ...]

    def lesson(self, number: int) -> Lesson:
        for lesson in self.lessons:
            if lesson.number == number:
                return lesson
        numbers = ", ".join(str(x.number) for x in self.lessons)
        raise UsageError(f"there is no lesson {number}; lessons are numbered {numbers}")

    def exercise(self, exercise_id: str) -> Exercise:
        for ex in self.exercises:
            if ex.id == exercise_id:
                return ex
        import difflib

        close = difflib.get_close_matches(exercise_id, [e.id for e in self.exercises], n=1)
        tip = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"no exercise called {exercise_id!r}{tip}; `shapetrace exercise list` "
                         "shows them all")

    def next_after(self, exercise_id: str) -> Exercise | None:
        ids = [e.id for e in self.exercises]
        i = ids.index(exercise_id)
        return self.exercises[i + 1] if i + 1 < len(ids) else None


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ContentError(f"missing lesson file {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ContentError(f"{path}: {exc}") from None


def _need(data: dict, key: str, kind: type, where: Path):
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, (str, list)) and not value):
        raise ContentError(f"{where}: '{key}' must be a non-empty {kind.__name__}")
    return value


#: An implementation's code puts subject k's function at line ``1 + (k + 1) * LINES_PER_FUNCTION``, so
#: the line numbers of the functions a learner's test receives say nothing about which implementation it is.
LINES_PER_FUNCTION = 50


def _test_fields(data: dict, path: Path) -> dict:
    """The fields of a ``kind = "test"`` exercise: subjects, reference code and mutants.

    A mutant is a bug catalogue id (:mod:`shapetrace.attention.catalogue`) and the exercise's own text for
    why a test misses it; what it does and its code come from the catalogue's broken functions, with the
    reference's version of every subject the entry does not break.
    """
    subjects = _need(data, "subjects", list, path)
    if not all(isinstance(x, str) and x.isidentifier() for x in subjects):
        raise ContentError(f"{path}: every subject must be a function name")
    reference = _split_reference(_need(data, "reference", str, path), subjects, path)
    mutants = tuple(_mutant(m, subjects, reference, path) for m in _need(data, "mutants", list, path))
    if len({m.id for m in mutants}) != len(mutants):
        raise ContentError(f"{path}: duplicate mutant ids")
    return dict(subjects=tuple(subjects), reference_code=_assemble(reference, [reference[1][s] for s in subjects],
                                                                   path), mutants=mutants)


def _split_reference(code: str, subjects: list[str], path: Path) -> tuple[str, dict[str, str]]:
    """The reference's imports, and the source of each subject's function."""
    import textwrap

    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ContentError(f"{path}: the reference does not parse: {exc}") from None
    lines = code.splitlines(True)
    imports = "".join(ast.get_source_segment(code, n) + "\n" for n in tree.body
                      if isinstance(n, (ast.Import, ast.ImportFrom)))
    defs = {n.name: textwrap.dedent("".join(lines[n.lineno - 1:n.end_lineno])) for n in tree.body
            if isinstance(n, ast.FunctionDef)}
    missing = [s for s in subjects if s not in defs]
    if missing:
        raise ContentError(f"{path}: the reference defines no {', '.join(missing)}")
    return imports, defs


def _assemble(reference: tuple[str, dict[str, str]], pieces: list[str], path: Path) -> str:
    """One implementation's code: the imports, then each subject's function at its fixed line."""
    out = reference[0]
    for k, piece in enumerate(pieces):
        start = (k + 1) * LINES_PER_FUNCTION
        if out.count("\n") > start or piece.count("\n") >= LINES_PER_FUNCTION:
            raise ContentError(f"{path}: a function under test is longer than {LINES_PER_FUNCTION} lines")
        out += "\n" * (start - out.count("\n")) + piece
    return out


def _mutant(data: dict, subjects: list[str], reference, path: Path) -> Mutant:
    """One ``[[mutants]]`` entry, completed from the bug catalogue."""
    from shapetrace.attention.catalogue import CATALOGUE

    mutant_id = _need(data, "id", str, path)
    if set(data) - {"id", "missed"}:
        raise ContentError(f"{path}: mutant {mutant_id!r} may only have 'id' and 'missed': what it does and its "
                           "code come from the bug catalogue (shapetrace/attention/mutants.py)")
    entry = CATALOGUE.get(mutant_id)
    broken = {s: entry.function(s) for s in subjects if entry is not None and entry.function(s) is not None}
    if not broken:
        why = "is not in the bug catalogue" if entry is None else f"breaks none of {', '.join(subjects)}"
        raise ContentError(f"{path}: mutant {mutant_id!r} {why}")
    does = ", with ".join(f.does for f in broken.values())
    correct = [s for s in subjects if s not in broken]
    if correct:
        does += f", with the correct {' and '.join(correct)}"
    pieces = [broken[s].code if s in broken else reference[1][s] for s in subjects]
    return Mutant(mutant_id, does, _need(data, "missed", str, path).strip(), _assemble(reference, pieces, path))


def _probe_possible(checks: dict, inputs: str, data: dict, path: Path) -> None:
    """``max_alloc_bytes`` is measured on a large input (:mod:`.probe`): the builder needs one."""
    from shapetrace.exercises.probe import SIZES, budget

    if "max_alloc_bytes" not in checks:
        return
    if inputs not in SIZES or not data.get("output_names"):
        raise ContentError(f"{path}: max_alloc_bytes needs a large input for inputs {inputs!r} (probe.SIZES: "
                           f"{', '.join(SIZES)}) and output_names")
    try:
        budget(checks["max_alloc_bytes"], dict(out_bytes=1, in_bytes=1))
    except (ValueError, SyntaxError):
        raise ContentError(f"{path}: max_alloc_bytes {checks['max_alloc_bytes']!r} is not a byte budget "
                           "(out_bytes, in_bytes, integers, + - * //)") from None


def _autograd(data: dict, path: Path) -> str:
    """``autograd``: code that defines the exercise's function with autograd (checked to parse and define it)."""
    code = data.get("autograd", "")
    if not code:
        return ""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ContentError(f"{path}: autograd does not parse: {exc}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == data.get("function") for n in tree.body):
        raise ContentError(f"{path}: autograd must define {data.get('function')}()")
    return code


def _parts(data: dict, path: Path) -> tuple[str, ...]:
    """``parts``: the names of the tensors a function returns as a tuple (``()``: it returns one)."""
    parts = data.get("parts", [])
    if not isinstance(parts, list) or not all(isinstance(p, str) and p.isidentifier() for p in parts):
        raise ContentError(f"{path}: parts must be a list of names (the tensors the function returns)")
    return tuple(parts)


def hints_for_of(data: dict, count: int) -> tuple[tuple[str, ...], ...]:
    """``hints_for`` as one tuple of faults per hint (a bare string is one fault; missing hints: any fault)."""
    listed = data.get("hints_for", [])
    faults = tuple((entry,) if isinstance(entry, str) else tuple(str(f) for f in entry) for entry in listed)
    return faults + ((),) * (count - len(faults))


def load_exercise(folder: Path, lesson: int) -> Exercise:
    """Read and validate one ``exercise.toml``."""
    path = folder / "exercise.toml"
    data = _read_toml(path)
    kind = data.get("kind", "function")
    if kind not in KINDS:
        raise ContentError(f"{path}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    extra = _test_fields(data, path) if kind == "test" else {}
    if kind == "test":
        data.setdefault("inputs", "none")
    hints = _need(data, "hints", list, path)
    if not all(isinstance(h, str) and h.strip() for h in hints):
        raise ContentError(f"{path}: every hint must be non-empty text")
    inputs = _need(data, "inputs", str, path)
    if inputs not in BUILDERS and not (kind == "test" and inputs == "none"):
        raise ContentError(f"{path}: unknown inputs {inputs!r} (known: {', '.join(BUILDERS)})")
    verdict = _need(data, "starter_verdict", str, path)
    if verdict not in VERDICTS or verdict == "pass":
        raise ContentError(f"{path}: starter_verdict {verdict!r} must be a failing verdict")
    checks = data.get("checks", {})
    unknown = set(checks) - set(CHECK_KEYS)
    if unknown:
        raise ContentError(f"{path}: unknown checks {sorted(unknown)}")
    _probe_possible(checks, inputs, data, path)
    mistakes = tuple(Mistake(_need(m, "id", str, path), _need(m, "explain", str, path),
                             _need(m, "code", str, path), str(m.get("where", ""))) for m in data.get("mistakes", []))
    starter_mistake = data.get("starter_mistake")
    if starter_mistake and starter_mistake not in {m.id for m in mistakes}:
        raise ContentError(f"{path}: starter_mistake {starter_mistake!r} is not among the mistakes")
    ex = Exercise(
        id=_need(data, "id", str, path), title=_need(data, "title", str, path),
        function=_need(data, "function", str, path), task=_need(data, "task", str, path),
        inputs=inputs, lesson=lesson, folder=folder, starter_verdict=verdict,
        starter_mistake=starter_mistake, hints=tuple(h.strip() for h in hints), mistakes=mistakes,
        checks=dict(checks), returns=data.get("returns", "tensor"), parts=_parts(data, path),
        output_names=data.get("output_names", ""), movement=bool(data.get("movement", False)),
        kind=kind, hints_for=hints_for_of(data, len(hints)), autograd=_autograd(data, path), **extra,
    )
    if ex.id != folder.name:
        raise ContentError(f"{path}: id {ex.id!r} must match its folder name {folder.name!r}")
    for f in (ex.starter, ex.solution):
        if not f.is_file():
            raise ContentError(f"exercise {ex.id}: missing {f.name}")
    return ex


@lru_cache(maxsize=4)
def _load(root: Path) -> Curriculum:
    if not (root / "index.toml").is_file():
        raise ContentError(f"no lessons found at {root}: set SHAPETRACE_LESSONS to the lessons/ folder "
                           "of a shapetrace checkout")
    index = _read_toml(root / "index.toml")
    lessons, exercises = [], []
    for entry in index.get("lessons", []):
        where = root / "index.toml"
        folder = root / _need(entry, "dir", str, where)
        number = _need(entry, "number", int, where)
        ids = tuple(entry.get("exercises", []))
        lesson = Lesson(number, _need(entry, "title", str, where), entry.get("summary", ""),
                        folder, ids, tuple(entry.get("topics", [])))
        if not lesson.text_path.is_file():
            raise ContentError(f"lesson {number}: missing {lesson.text_path}")
        lessons.append(lesson)
        exercises += [load_exercise(folder / ex_id, number) for ex_id in ids]
    seen = [e.id for e in exercises]
    dupes = {i for i in seen if seen.count(i) > 1}
    if dupes:
        raise ContentError(f"duplicate exercise ids: {sorted(dupes)}")
    return Curriculum(root, tuple(lessons), tuple(exercises))


def load(root: Path | None = None) -> Curriculum:
    """The curriculum under ``root`` (default :func:`lessons_root`), validated."""
    return _load(Path(root or lessons_root()).resolve())
