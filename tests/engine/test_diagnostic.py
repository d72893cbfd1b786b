"""A diagnostic says what is wrong in ``message`` and how to repair it in ``fix``: every rule, every kind.

The corpus (:mod:`tests.diagnostic_corpus`) makes every kind fire; each message must be free of
prescriptive sentences (an imperative, or code the learner did not write), each error and warning
must carry a fix, and users still read the message, then the fix.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from shapetrace.engine.diagnostic import Diagnostic
from shapetrace.engine.kinds import Kind, readme_table
from shapetrace.engine.rules import diagnose
from tests.corpus import bug_models as bugs
from tests.diagnostic_corpus import ALL_KINDS, CORPUS_KINDS, corpus

ENGINE = Path(diagnose.__file__).parents[1]

#: a clause that starts with one of these words tells the reader what to do
IMPERATIVES = {"use", "call", "write", "replace", "swap", "put", "add", "move", "split", "transpose", "merge",
               "tile", "give", "pad", "zero", "try", "fix", "name", "permute", "reshape", "view", "multiply",
               "divide", "pick", "make", "bring", "go", "apply", "change", "remove", "drop", "keep", "set"}
#: calls that repair an attention layout (code a message may show only where the learner wrote it)
FIX_CALLS = {"transpose", "permute", "view", "reshape", "contiguous", "softmax", "repeat_interleave", "repeat",
             "unsqueeze", "flatten", "expand", "masked_fill", "name", "sqrt", "rearrange", "movedim", "swapaxes"}
CALL = re.compile(r"(\w+)\(([^()]*)\)")
NUMERIC_ARGS = re.compile(r"[-\d, ]*")
#: code that is no call: a product ``q @ k`` or a mask indexed into shape ``mask[:, None, None, :]``
RECIPES = re.compile(r"\b\w+ @ \w+|\w+\[[^\]]*None[^\]]*\]")
#: "view #3 ...", "view(2, 6, 512) has ...": a message names the op it is about, which is no imperative
OP_REFERENCE = re.compile(r"\w+ #\d+\b|\w+\([-\d, ]*\) ")


def prescriptions(d: Diagnostic, codes: list[str], op: str | None) -> list[str]:
    """The parts of ``d.message`` that prescribe a fix ([] when it only says what is wrong).

    A clause (after a full stop, a semicolon or a colon) that opens with an imperative, a conditional
    recipe ("If this is ...", "To ..."), "fix", "instead" telling what to do, an imperative after a comma
    ("after attention, move ..."), or code the learner did not write: a repairing call (a call of the
    diagnosed op with the sizes it ran with describes, not prescribes), a product ``q @ k``, a mask
    indexed into shape.
    """
    found = []
    for clause in re.split(r"(?<=[.;:])\s+", d.message):
        words = re.findall(r"[A-Za-z_]+", clause)
        first = words[0].lower() if words and not OP_REFERENCE.match(clause) else ""
        after_comma = re.findall(r", ([a-z]+) ", clause)
        if first in IMPERATIVES or IMPERATIVES & set(after_comma) or re.match(r"(If this is|To \w+ )", clause) \
                or re.search(r"\bfix\b", clause, re.I):
            found.append(clause)
    for m in RECIPES.finditer(d.message):
        if not any(m.group(0) in code for code in codes):
            found.append(m.group(0))
    for m in CALL.finditer(d.message):
        name, args = m.group(1), m.group(2)
        written = any(m.group(0) in code for code in codes)
        ran = name == op and NUMERIC_ARGS.fullmatch(args)
        if name in FIX_CALLS and not written and not ran:
            found.append(m.group(0))
    if re.search(r"\binstead\b", d.message) and re.search(r"\b(use|call|write|replace|swap|put|add)\b.*\binstead\b",
                                                          d.message, re.I):
        found.append("... instead")
    return found


@pytest.fixture(scope="module")
def found():
    """(diagnostic, the code of every op of its trace, the op it is about) for every finding of the corpus."""
    out = []
    for t in corpus():
        codes = [e.code for e in t.events]
        for d in t.diagnostics:
            out.append((d, codes, t.events[d.event].op if d.event is not None else None))
    return out


def kinds_named_in(tree: ast.AST) -> set[str]:
    """``Kind.MIXED_AXIS`` and the like, as the kinds' values."""
    return {Kind[node.attr].value for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "Kind" and node.attr in Kind.__members__}


def bare_kinds_in(tree: ast.AST) -> list[str]:
    """String constants that spell a kind, and ``Diagnostic(...)`` calls (a rule makes a finding with
    ``Kind.X.found``, so the severity is the kind's own)."""
    found = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in ALL_KINDS]
    return found + [f"Diagnostic(...) at line {node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name) and node.func.id == "Diagnostic"]


def _rule_trees():
    paths = [*(ENGINE / "rules").glob("*.py"), ENGINE / "faults.py", ENGINE / "dependencies.py", ENGINE / "padding.py",
             ENGINE / "heads.py", ENGINE / "pooled_read.py", ENGINE / "lengths_read.py",
             ENGINE / "grouped_positions.py", ENGINE / "mixing.py",
             ENGINE / "backward" / "checks.py",   # (measured; backward)
             ENGINE / "readings.py"]   # (findings checked under every reading of equal sizes)
    return {p.name: ast.parse(p.read_text(encoding="utf-8")) for p in paths}


def test_every_kind_is_made_by_a_rule_and_every_rule_names_its_kind_through_the_enum():
    named = set().union(*(kinds_named_in(tree) for tree in _rule_trees().values()))
    assert named == ALL_KINDS == {k.value for k in Kind}
    assert {name: bare_kinds_in(tree) for name, tree in _rule_trees().items() if bare_kinds_in(tree)} == {}


def test_the_bare_kind_scanner_finds_what_it_looks_for():
    planted = ast.parse('def rule(e):\n    return [Diagnostic("error", "mixed-axis", e, "m")] if e.kind == "nan-rows" '
                        'else Kind.SCALE_NOT_HEAD_DIM.found(e, "m")\n')
    assert sorted(bare_kinds_in(planted)) == ["Diagnostic(...) at line 2", "mixed-axis", "nan-rows"]
    assert kinds_named_in(planted) == {"scale-not-head-dim"}


def test_a_kind_has_one_severity_unless_it_declares_another():
    assert Kind.NAN_ROWS.found(2, "m").severity == "error"
    assert Kind.SOFTMAX_IMPLICIT_DIM.found(2, "m", severity="note").severity == "note"
    with pytest.raises(ValueError, match="mixed-axis is never 'note'"):
        Kind.MIXED_AXIS.found(2, "m", severity="note")
    assert all(k.severity in ("error", "warning", "note") and k.meaning and "|" not in k.meaning for k in Kind)


def test_the_readme_table_of_diagnostics_is_the_enum():
    readme = (ENGINE.parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("| kind | severity | what it means |")
    end = readme.index("\n\n", start)
    assert readme[start:end] == readme_table()


def test_every_kind_of_the_corpus_fires_in_it(found):
    assert CORPUS_KINDS <= ALL_KINDS
    assert {d.kind for d, _, _ in found} & ALL_KINDS >= CORPUS_KINDS


def test_no_message_prescribes_a_fix(found):
    bad = [(d.kind, p, d.message) for d, codes, op in found for p in prescriptions(d, codes, op)]
    assert bad == []


def test_every_error_and_warning_kind_has_a_fix_apart_from_its_message(found):
    for d, _, _ in found:
        if d.severity in ("error", "warning"):
            assert d.fix.strip(), d
        if d.fix:
            assert d.fix not in d.message and d.message not in d.fix, d


def test_users_read_the_message_then_the_fix(found):
    for d, _, _ in found:
        sep = "\n" if "\n" in d.message + d.fix else " "
        assert d.text == (d.message + sep + d.fix if d.fix else d.message)
        also = {"also_seen_at": list(d.also)} if d.also else {}
        assert d.to_dict() == {"severity": d.severity, "kind": d.kind, "event": d.event,
                               "message": d.message, "fix": d.fix, **also}


@pytest.mark.parametrize("message, fix", [
    # the messages of this checkout before message and fix were apart: each must be caught
    ("matmul #3 multiplies the keys [S, d_k] by the queries [d_k, T]: each output row belongs to a key.",
     "Put the queries first: scores = q @ k.transpose(-2, -1)."),
    ("softmax #4 normalises over axis 2; each query's weights must sum to 1 over the keys, axis -1.",
     "Use softmax(scores, dim=-1)."),
    ("16 rows are NaN. Every key of these queries is masked.", "Fix: give every query one visible key."),
    ("view #0 turns [B, T, D] into [B·T/2, T/3, D]: axis 0 groups blocks of tokens.",
     "That is transpose(0, 1), not a view."),
    ("matmul #9 sums over d_k of the first with T of the second.",
     "If this is q @ k, transpose k first: q @ k.transpose(-2, -1)."),
    ("softmax #5 normalises over d_k: each weight row mixes features, not tokens.",
     "Attention scores are [.., T, T]: q @ k on [B, H, T, d_k] tensors."),
    ("masked_fill #12 broadcasts the mask: it hides whole query rows.",
     "A key-padding mask [B, T] goes to [B, 1, 1, T]: mask[:, None, None, :]."),
    ("linear #13 projects over its last axis, which holds tokens.",
     "Its input should be [B, T, D]; after attention, move the heads back behind the tokens."),
])
def test_the_check_catches_a_message_that_prescribes(message, fix):
    d = Diagnostic("error", "k", 0, message)
    assert prescriptions(d, ["y = x.view(2, 6, 8)"], "matmul") == []
    glued = Diagnostic("error", "k", 0, f"{message} {fix}")
    assert prescriptions(glued, ["y = x.view(2, 6, 8)"], "matmul") != []


def test_the_check_lets_the_learners_own_code_and_the_failing_call_through():
    d = Diagnostic("error", "view-incompatible", 2, "view #2 raised: view(2, 6, 512) has to merge H and d_k.")
    assert prescriptions(d, ["y.view(B, T, D)"], "view") == []
    d = Diagnostic("error", "k", 2, "y = q.transpose(1, 2) names an axis h, but it holds tokens.")
    assert prescriptions(d, ["y = q.transpose(1, 2)"], "rearrange") == []
    assert prescriptions(d, ["y = q"], "rearrange") == ["transpose(1, 2)"]


# -- exact wording of the main kinds --------------------------------------------------------------------------

def _one(t, kind) -> Diagnostic:
    return next(d for d in t.diagnostics if d.kind == kind)


def test_query_key_swapped_wording():
    t, _ = bugs.trace_cross(bugs.key_query_swapped, 2, 6, 10, 32, 4)
    d = _one(t, "query-key-swapped")
    assert (d.severity, t.events[d.event].op) == ("error", "matmul")
    assert d.message == (f"matmul #{d.event} multiplies the keys [B=2, H=4, S=10, d_k=8] by the queries "
                         "[B=2, H=4, d_k=8, T=6]: the scores' rows are key tokens and their columns query tokens, so a "
                         "softmax over the last axis weighs queries, not keys, and each output row belongs to a key.")
    assert d.fix == "Put the queries first: scores = q @ k.transpose(-2, -1)."


def test_attends_over_heads_wording():
    t, _ = bugs.trace(bugs.fuxictr_heads_as_tokens, 2, 6, 64, 8)
    d = _one(t, "attends-over-heads")
    # reported at FuxiCTR's view(B * T, H, d_k), which made the layout; the message is the product's
    bmm = d.also[0]
    assert (t.events[d.event].op, t.events[bmm].op) == ("view", "bmm")
    assert d.message == (f"The layout is made by view #{d.event}: bmm #{bmm} computes scores [B·T=12, H=8, H=8] "
                         "whose key axis is H (heads): each query weighs heads instead of the other tokens, and the "
                         "tokens sit in the batch axes [B·T=12].")
    assert d.fix == ("Split the heads with view(B, T, H, d_k), move them ahead of the tokens with transpose(1, 2), "
                     "and multiply [B, H, T, d_k] @ [B, H, d_k, T].")


def test_mask_wrong_axis_wording():
    t, _ = bugs.trace(bugs.masked_fill_query_axis(float("-inf")), 2, 6, 64, 8)
    d = _one(t, "mask-wrong-axis")
    assert d.message == (f"masked_fill #{d.event} broadcasts the mask [B=2, 1, T=6, 1] against the scores "
                         "[B=2, H=8, T=6, T=6]: its T axis lines up with the queries and it is broadcast over the "
                         "keys, so it hides whole query rows while every query still attends to the padding keys.")
    assert d.fix == "A key-padding mask [B, T] goes to [B, 1, 1, T]: mask[:, None, None, :]."


def test_scale_not_head_dim_wording():
    t, _ = bugs.trace(bugs.scaled(by_model_width=True), 2, 6, 64, 8)
    d = _one(t, "scale-not-head-dim")
    assert d.severity == "warning"
    assert d.message == ("the scores are scaled by 1/√64 = 0.125, the model width D; attention divides by "
                         "√d_k = √8 (one head's width), 0.3536. With √D the softmax is flatter than intended by a "
                         "factor √H = 2.83.")
    assert d.fix == "Use scores / math.sqrt(d_k)."


def test_mixed_axis_wording_for_a_split_and_for_a_merge():
    t, _ = bugs.trace(bugs.view_without_transpose, 2, 6, 64, 8)
    d = _one(t, "mixed-axis")
    assert d.message == (f"view #{d.event} turns [B=2, T=6, D=64] into [B=2, !T·H=8, !H=6, d_k=8]: axis 1 (size 8) "
                         "holds pieces of T and H, so its entries mix different tokens together. The tensor has the "
                         "right shape but the wrong contents.")
    assert d.fix == ("Split the features where they are: view(B, T, H, d_k), then transpose(1, 2) to move the "
                     "heads ahead of the tokens.")
    t, _ = bugs.trace(bugs.merge_without_transpose, 2, 6, 64, 8)
    d = _one(t, "mixed-axis")
    (linear,) = d.also   # the projection over the mixed axis: the same bug (engine/rules/causes.py)
    assert d.message == (f"reshape #{d.event} turns [B=2, H=8, T=6, d_k=8] into [B=2, !H·T=6, !H·T·d_k=64]: axis 1 "
                         "(size 6) holds pieces of H and T, so its entries mix different tokens together. The tensor "
                         f"has the right shape but the wrong contents. Also seen at #{linear} linear.")
    assert d.fix == ("Merge heads by moving them back behind the tokens first: transpose(1, 2) to [B, T, H, d_k], "
                     "then .contiguous().view(B, T, D).")


def test_softmax_wrong_axis_wording():
    t, _ = bugs.trace(bugs.softmax_dim_minus_2, 2, 6, 64, 8)
    d = _one(t, "softmax-wrong-axis")
    assert d.message == (f"softmax #{d.event} normalises over axis 2 (T, query) of the scores [B=2, H=8, T=6, T=6]; "
                         "each query's weights must sum to 1 over the keys, axis -1.")
    assert d.fix == "Use softmax(scores, dim=-1)."


def test_view_incompatible_keeps_the_why_in_the_message_and_the_fixes_in_fix():
    from shapetrace.app.session import trace_variant
    from shapetrace.attention.config import AttentionConfig as C

    t = trace_variant(C(broken="view-after-transpose")).trace
    d = _one(t, "view-incompatible")
    assert d.message.startswith(f"view #{d.event} raised: view(2, 6, 512) has to merge H and d_k")
    assert d.message.endswith("(a transpose or permute reordered the axes without moving any data).")
    assert d.fix.splitlines() == [
        "fix 1: .contiguous().view(2, 6, 512)  copies 24 KiB (6,144 elements) into a new buffer in the current "
        "axis order, then views it",
        "fix 2: .reshape(2, 6, 512)  makes the same 24 KiB copy, silently"]
    assert d.text == d.message + "\n" + d.fix


def test_a_verdict_keeps_what_is_wrong_and_drops_the_fix():
    from shapetrace.exercises.judge import Learned, _diagnostics

    facts = {"events": [{"index": 0, "error": ""}, {"index": 3, "error": "RuntimeError: view size"}],
             "diagnostics": [
                 {"severity": "error", "kind": "mixed-axis", "event": 0, "message": "view #0 mixes T and H.",
                  "fix": "Split the features where they are: view(B, T, H, d_k)."},
                 {"severity": "error", "kind": "view-incompatible", "event": 3, "message": "view #3 raised.",
                  "fix": "fix 1: .contiguous().view(2, 6, 512)"},
                 {"severity": "note", "kind": "ambiguous-sizes", "event": None, "message": "H = d_k = 8: ambiguous.",
                  "fix": "Use distinct sizes."}]}
    assert _diagnostics(Learned(facts=facts)) == [
        {"severity": "error", "kind": "mixed-axis", "event": 0, "message": "view #0 mixes T and H."},
        {"severity": "note", "kind": "ambiguous-sizes", "event": None, "message": "H = d_k = 8: ambiguous."}]
