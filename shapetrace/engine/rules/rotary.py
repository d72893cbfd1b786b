"""Does each rotary table pair features the way its rotation does? (issue 33 item 4)

Reads ``analysis.rotaries`` (:mod:`shapetrace.engine.rotary`: the rotation's partner of each feature,
from element provenance, and the table's equal columns, from its values at call time):

* ``rotary-pairing-mismatch`` (error): a table gives a feature and the feature it is rotated with
  different values, so each pair is turned by two angles and no rotation comes out;
* ``rotary-same-angle-every-token`` (error): along the axis the names say holds the tokens, neither
  table changes (positions built from ``x.size(0)`` on batch-first input, or expanded from the batch):
  every token is turned by the same angles, which q·k cancels, so the scores get no position;
* ``rotary-position-restarts`` (error): a rotation at position 0 (both tables read: cos 1, sin 0 on every
  feature) joined along the tokens after other tokens: a key appended to a cache whose position restarted;
* ``rotary-pairing-declared`` (warning): the rotation pairs features one way (its partners, from element
  provenance) while the nearest module around it that says how its rotary pairs features says the other
  (vLLM's ``is_neox_style``, flash-attn's ``interleaved``: :func:`.modules.declared_pairings`): the table may
  agree with the rotation, but the weights were trained for the declared pairing (vllm-project/vllm-ascend
  pull request #12820: a GPT-J style model rotated by halves);
* ``rotary-pairing-unchecked`` (note): the table's values, or the rotation's moves, were not read; the
  verdict then does not claim the pairing was checked;
* ``rotary-grid-positions`` (note): the tables turn each token by several positions in separate features
  (Pixtral's rows and columns, CogVideoX's time, height and width): which grid position each token takes
  is not in what torch records (rows and columns swapped look as right), so the tables are not checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shapetrace.engine.declared import inside
from shapetrace.engine.formatting import fmt_named
from shapetrace.engine.kinds import Kind
from shapetrace.engine.modules import PAIRING_FLAGS
from shapetrace.engine.rotary import MISMATCH, PAIRED, UNCHECKED, step_token_label
from shapetrace.engine.rotary_positions import one_position_per_token
from shapetrace.engine.rules.indices import told_by_size

if TYPE_CHECKING:  # pragma: no cover
    from shapetrace.engine.analysis import Analysis
    from shapetrace.engine.diagnostic import Diagnostic
    from shapetrace.engine.events import TensorInfo
    from shapetrace.engine.rotary import Rotary

#: how a table laid out for each pairing is written, for the fix
_TABLE_FOR = {"halves": "torch.cat((freqs, freqs), dim=-1)", "interleaved": "freqs.repeat_interleave(2, dim=-1)"}


def rotary_pairing(analysis: Analysis) -> list[Diagnostic]:
    """A rotary table whose equal columns are not the rotation's pairs; a rotary left unchecked."""
    out = []
    for rotary in analysis.rotaries:
        where = _where(analysis, rotary)
        still = _tokens_still(analysis, rotary)
        if still is not None:
            out.append(_same_angle(analysis, rotary, where, still))
        if _restarts(analysis, rotary):
            out.append(_restart(analysis, rotary, where))
        elif _off(analysis, rotary):
            out.append(_position_off(analysis, rotary, where))
        if rotary.outcome == PAIRED and rotary.varies and not one_position_per_token(rotary.angles):
            out.append(Kind.ROTARY_GRID_POSITIONS.found(rotary.event, (
                f"the rotary embedding rotated at {where} turns each token by several positions, in separate "
                "features (a 2-D or 3-D rotary: rows and columns, or time, height and width); which grid position "
                "each token takes is nowhere in what torch records, so its tables were not checked"),
                "Check by hand that each token's row and column ids follow the order its tokens were flattened in."))
        declared = _declared_otherwise(analysis, rotary)
        if declared is not None:
            out.append(_against_declaration(rotary, where, declared))
        if rotary.outcome == MISMATCH:
            out.append(_mismatch(rotary, where))
        elif rotary.outcome == UNCHECKED:
            out.append(Kind.ROTARY_PAIRING_UNCHECKED.found(rotary.event, (
                f"the rotary embedding rotated at {where} was not checked for how its table pairs features: "
                f"{rotary.why}."), "Trace a small copy on the CPU, with the table broadcast over the heads, "
                                   "to check it."))
    return out


def _rotated(analysis: Analysis, rotary: Rotary) -> TensorInfo | None:
    """The rotated tensor as its row shows it (the last data move of the rotation makes it, with the
    shape of the tensor it rotates), or None."""
    if rotary.event is None or rotary.event >= len(analysis.events) or not analysis.events[rotary.event].outputs:
        return None
    return analysis.events[rotary.event].outputs[0]


def _tokens_still(analysis: Analysis, rotary: Rotary) -> int | None:
    """The axis of the rotated tensor that its names say holds the tokens, when neither table changes
    along it (it has more than one entry); None otherwise (tables not read, no axis named tokens, or a
    rotation of an earlier rotation's result: a shift of tokens that already carry their positions)."""
    rotated = _rotated(analysis, rotary)
    if rotated is None or not rotary.still or rotary.shifts:
        return None
    return next((j for j in rotary.still if j < len(rotated.dims) - 1 and not told_by_size(analysis, rotated.dims[j])
                 and analysis.namer.plain_role(rotated.dims[j]) == "tokens"), None)


def _same_angle(analysis: Analysis, rotary: Rotary, where: str, axis: int) -> Diagnostic:
    rotated = _rotated(analysis, rotary)
    dims, shape = rotated.dims, rotated.shape
    changes = [f"axis {j}" if not dims[j] or told_by_size(analysis, dims[j]) else
               f"{dims[j]} ({analysis.namer.plain_role(dims[j]) or 'unnamed'})" for j in rotary.varies if j < len(dims)]
    told = f"their angles change along {' and '.join(changes)} instead" if changes else \
        "they hold the same angles everywhere"
    return Kind.ROTARY_SAME_ANGLE_EVERY_TOKEN.found(rotary.event, (
        f"the rotary embedding rotated at {where} turns {fmt_named(dims, shape)} by the same angles at every "
        f"token along {dims[axis]} (axis {axis}): neither its cos nor its sin table changes along it, {told}. "
        "q·k cancels a rotation both share, so the scores get no position from it."),
        "Count the positions along the tokens: position_ids = torch.arange(T) with T = x.size(1) on "
        f"batch-first input (offset by the cache length when decoding), not along {_counted_along(analysis, rotary)}.")


def _counted_along(analysis: Analysis, rotary: Rotary) -> str:
    """What the tables were counted along instead of the tokens, in words: ``the heads axis (H)``."""
    dims = _rotated(analysis, rotary).dims
    named = [(dims[j], analysis.namer.plain_role(dims[j])) for j in rotary.varies if j < len(dims) and dims[j]]
    return f"the {named[0][1]} axis ({named[0][0]})" if len(named) == 1 and named[0][1] else "another axis"


def _restarts(analysis: Analysis, rotary: Rotary) -> bool:
    """A rotation at position 0 joined after other entries along an axis its names say holds tokens."""
    rotated = _rotated(analysis, rotary)
    if rotary.appended is None or rotated is None:
        return False
    label = _appended_along(analysis, rotary, rotated)
    return label is not None and not told_by_size(analysis, label) and analysis.namer.plain_role(label) == "tokens"


def _appended_along(analysis: Analysis, rotary: Rotary, rotated: TensorInfo) -> str | None:
    """The name of the axis a rotation is appended along: its own, or, for one token (an axis of one entry,
    which needs no name: a decoding step's), the name that axis has in the join's result (``T+1``)."""
    join, _, dim = rotary.appended
    if dim >= len(rotated.dims):
        return None
    if rotated.dims[dim] is not None or rotated.shape[dim] != 1 or join is None or join >= len(analysis.events):
        return rotated.dims[dim]
    joined = analysis.events[join].outputs
    return joined[0].dims[dim] if joined and dim < len(joined[0].dims) else None


def _restart(analysis: Analysis, rotary: Rotary, where: str) -> Diagnostic:
    rotated = _rotated(analysis, rotary)
    join, before, dim = rotary.appended
    joined = f"{analysis.events[join].op} #{join}" if join is not None and join < len(analysis.events) else \
        "a call without a row"
    return Kind.ROTARY_POSITION_RESTARTS.found(join if join is not None else rotary.event, (
        f"the rotary embedding rotated at {where} turns {_first(rotated, dim)}{fmt_named(rotated.dims, rotated.shape)} "
        f"by position 0 (its cos table is 1 and its sin table 0 on every feature), and {joined} then appends it along "
        f"{_appended_along(analysis, rotary, rotated)} (axis {dim}) after {before} tokens: its position starts "
        f"again at 0 instead of "
        f"continuing at {before}, so q·k reads the distances to the cached keys wrong."),
        "Offset the positions by the cache's length: positions = torch.arange(past, past + T) (meta-llama's "
        "start_pos, transformers' cache_position).")


def _declared_otherwise(analysis: Analysis, rotary: Rotary) -> tuple[str, str, str] | None:
    """``(module path, attribute, pairing)`` of the nearest module around the rotation (the one deepest in the
    module tree) whose flags say how its rotary pairs features, where they say otherwise than the rotation
    pairs them; None where the rotation's pairing is neither halves nor interleaved (or is both: two features),
    no module around it says, or the nearest one's flags disagree among themselves."""
    rotation = pairing(rotary.partners) if len(rotary.partners) > 2 else None
    if rotation not in _ROTATION_WORDS or rotary.event is None or rotary.event >= len(analysis.events):
        return None
    module = analysis.events[rotary.event].module
    around = [d for d in analysis.pairings_declared if inside(module, d[0])]
    if not around:
        return None
    nearest = max(len(path) for path, _, _ in around)
    said = {d for d in around if len(d[0]) == nearest}
    if len({pairs for _, _, pairs in said}) != 1:
        return None
    found = min(said)
    return None if found[2] == rotation else found


def _against_declaration(rotary: Rotary, where: str, declared: tuple[str, str, str]) -> Diagnostic:
    path, attribute, said = declared
    rotation = pairing(rotary.partners)
    flag = f"{path + '.' if path else ''}{attribute}"
    value = PAIRING_FLAGS[attribute.rsplit(".", 1)[-1]] == said
    return Kind.ROTARY_PAIRING_DECLARED.found(rotary.event, (
        f"{where} rotates features in pairs {_ROTATION_WORDS[rotation]}, but {flag} = {value} says the model "
        f"pairs them {_PAIRS_WORDS[said]}. A table laid out to match turns each pair as one, so nothing else in "
        "the run disagrees; but weights trained for the declared pairing meet every feature with the wrong "
        "partner, and q·k no longer reads positions as they were learned."),
        f"Rotate as {flag} says ({_ROTATE_FOR[said]}), with its table laid out to match; or, if the flag is "
        "wrong, correct the flag.")


def _first(rotated: TensorInfo, dim: int) -> str:
    """``the first token of `` where the rotated tensor holds several along the join's axis, else nothing."""
    return "the first token of " if dim < len(rotated.shape) and rotated.shape[dim] > 1 else ""


def _off(analysis: Analysis, rotary: Rotary) -> bool:
    """A rotation of one token whose position was read and differs from the one its token takes, along an
    axis its names say holds the tokens (position 0 where the token is appended is :func:`_restarts`'s)."""
    rotated = _rotated(analysis, rotary)
    if rotary.position is None or rotary.expected is None or rotary.position == rotary.expected \
            or rotary.at_zero or rotated is None or rotary.placed is None:
        return False
    axis, label = rotary.placed[0], step_token_label(analysis.events, rotary, rotated)
    return axis < len(rotated.dims) and rotated.shape[axis] == 1 and not told_by_size(analysis, label) \
        and analysis.namer.plain_role(label) == "tokens"


def _position_off(analysis: Analysis, rotary: Rotary, where: str) -> Diagnostic:
    rotated = _rotated(analysis, rotary)
    return Kind.ROTARY_POSITION_OFF.found(rotary.event, (
        f"the rotary embedding rotated at {where} turns {fmt_named(rotated.dims, rotated.shape)} by position "
        f"{rotary.position} (its cos and sin tables hold that position's angles on every feature, read against "
        f"the run's table of consecutive positions), but its token takes position {rotary.expected}: "
        f"{rotary.placed[1]}. q·k then reads its distance to every other token "
        f"{abs(rotary.position - rotary.expected)} off."),
        "Count the step's positions from the cache's length: positions = torch.arange(past, past + T) with past "
        "the number of tokens already cached (meta-llama's start_pos, transformers' cache_position).")


def _where(analysis: Analysis, rotary: Rotary) -> str:
    if rotary.event is None or rotary.event >= len(analysis.events):
        return "a call without a row"
    return f"{analysis.events[rotary.event].op} #{rotary.event}"


def pairing(partners: tuple[int, ...]) -> str:
    """``halves`` (i with i + d/2), ``interleaved`` (2k with 2k + 1), or the pairs listed."""
    d = len(partners)
    if all(p == i ^ 1 for i, p in enumerate(partners)):
        return "interleaved"
    if all(p == (i + d // 2) % d for i, p in enumerate(partners)):
        return "halves"
    return ", ".join(f"{i}↔{p}" for i, p in enumerate(partners) if i < p)


def _layout(classes: tuple[int, ...]) -> str:
    """How a table's equal columns pair its features, in words."""
    d = len(classes)
    for name, partner in (("interleaved", lambda i: i ^ 1), ("halves", lambda i: (i + d // 2) % d)):
        if all(classes[i] == classes[partner(i)] for i in range(d)):
            return f"its equal columns pair features {_TABLE_WORDS[name]}"
    return "no two of its columns pair features as the rotation does"


_ROTATION_WORDS = {"halves": "by halves (feature i with i + d/2, as rotate_half does)",
                   "interleaved": "interleaved (feature 2k with 2k + 1, as rotate_every_two does)"}
_PAIRS_WORDS = {"halves": "by halves (feature i with i + d/2)", "interleaved": "interleaved (feature 2k with 2k + 1)"}
_ROTATE_FOR = {"halves": "rotate_half, torch.cat((-x2, x1), dim=-1) of the two halves",
               "interleaved": "rotate_every_two, torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)"}
_TABLE_WORDS = {"halves": "by halves (i with i + d/2, as torch.cat((freqs, freqs), -1) lays it out)",
                "interleaved": "interleaved (2k with 2k + 1, as freqs.repeat_interleave(2, -1) lays it out)"}


def _mismatch(rotary: Rotary, where: str) -> Diagnostic:
    rotation = pairing(rotary.partners)
    said = _ROTATION_WORDS.get(rotation, f"as {rotation}")
    bad = next(i for i, p in enumerate(rotary.partners) if rotary.equal[i] != rotary.equal[p])
    other = "interleaved" if rotation == "halves" else "halves"
    fix = (f"Lay the table out as the rotation pairs features: {_TABLE_FOR[rotation]}, not "
           f"{_TABLE_FOR[other]}; or rotate the way the table is laid out.") if rotation in _TABLE_FOR else \
        "Give each feature and the feature it is rotated with the same frequency in the table."
    table = fmt_named((None,) * len(rotary.table), rotary.table)
    return Kind.ROTARY_PAIRING_MISMATCH.found(rotary.event, (
        f"{where} rotates features in pairs {said}, but the table {table} it is multiplied by gives feature "
        f"{bad} and its partner {rotary.partners[bad]} different values: {_layout(rotary.equal)}. "
        "Each pair is turned by two different angles, so the embedding is no rotation and q·k no longer "
        "depends on the relative position alone."), fix)


def rotary_one_sided(analysis: Analysis) -> list[Diagnostic]:
    """A warning for each product of the queries and the keys where a rotary table turned one side only
    (:mod:`..rotary_sides`): the scores then hold that side's absolute position, not the distance between the two
    (gpt-neox's ``cat((key_rot, key_pass))`` of the unrotated keys). One per source line."""
    out = []
    for index, side in analysis.one_sided_rotations:
        e = analysis.events[index]
        turned, plain = ("queries", "keys") if side == "q" else ("keys", "queries")
        out.append(Kind.ROTARY_ONE_SIDED.found(index, (
            f"{e.op} #{index} scores queries against keys where a rotary table turned the {turned} on their way "
            f"from the projection and not the {plain}: RoPE makes q·k depend on the distance between two tokens "
            f"only where both are turned, so these scores hold each {turned[:-1] if side == 'k' else 'query'}'s "
            "absolute position instead."),
            f"Apply the rotary embedding to the {plain} too, with the same table (q, k = apply_rotary_pos_emb(q, k, "
            "cos, sin)), and use the rotated tensors."))
    return out
