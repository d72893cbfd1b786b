"""A diagnostic: one finding of a rule (plain data, shared by every rule module)."""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2}


@dataclass(frozen=True)
class Diagnostic:
    """One finding: how bad, what kind, at which event, what is wrong and how to repair it.

    ``message`` says observably what is wrong (which op, which axis holds what); it never prescribes a
    fix, so an exercise can show it before the learner has thought. ``fix`` says how to repair it
    ("" when there is nothing to repair, as for most notes).

    >>> d = Diagnostic("error", "softmax-wrong-axis", 3, "softmax #3 normalises over the queries.",
    ...                "Use softmax(scores, dim=-1).")
    >>> d.text
    'softmax #3 normalises over the queries. Use softmax(scores, dim=-1).'
    """

    severity: str
    kind: str
    event: int | None
    message: str
    fix: str = ""
    #: the other ops where the same bug shows (:mod:`.rules.causes` folds their findings into this one)
    also: tuple[int, ...] = ()
    #: what the finding blames: ``(operand, axis)`` pairs (operand ``-1`` is the first output, ``i >= 0``
    #: input ``i``); :mod:`.rules.causes` traces them back to the op that made that layout
    blame: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)
    #: a finding measured on the values (``event`` None): the events ``(first, last)`` it speaks of
    #: (None: the whole run); :func:`.rules.causes.with_witnesses` folds it into a rule's error there
    span: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        """What a user reads: the message, then the fix (on a new line when either spans lines)."""
        if not self.fix:
            return self.message
        return self.message + ("\n" if "\n" in self.message + self.fix else " ") + self.fix

    def to_dict(self) -> dict:
        out = {"severity": self.severity, "kind": self.kind, "event": self.event, "message": self.message,
               "fix": self.fix}
        if self.also:
            out["also_seen_at"] = list(self.also)
        return out
