"""A diagnostic: one finding of a rule (plain data, shared by every rule module)."""

from __future__ import annotations

from dataclasses import dataclass

SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2}


@dataclass(frozen=True)
class Diagnostic:
    """One finding: how bad, what kind, at which event, and what to do."""

    severity: str
    kind: str
    event: int | None
    message: str

    def to_dict(self) -> dict:
        return {"severity": self.severity, "kind": self.kind, "event": self.event, "message": self.message}
