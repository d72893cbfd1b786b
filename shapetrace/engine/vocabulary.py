"""The one vocabulary of axis roles: what each canonical name means and how people spell it.

shapetrace names axes with short canonical names (the notation its tables print):

======  ==============================================  =========================================
name    role                                            spellings accepted in ``--dims``
======  ==============================================  =========================================
B       batch                                           batch, batch_size, bs, b
T       query tokens (the first sequence)               seq, seq_len, seqlen, tokens, n_ctx, T_q
S       key/value tokens of a second sequence            T_k, src_len, kv_len, context, memory, mem
D       model width (features of one token)             d_model, dim, hidden, hidden_size, embed_dim, n_embd, C, E
H       attention heads                                 heads, n_head, n_heads, num_heads, nh
d_k     features of one head                            head_dim, dim_head, d_head, head_size, hs, d_kv
H_kv    key/value heads (grouped or multi-query)        kv_heads, n_kv_heads, num_key_value_heads
nW      windows per image (Swin)                        windows, num_windows
======  ==============================================  =========================================

Any other name may be given a role explicitly: ``ctx:tokens=6`` names an axis ``ctx`` whose role is
tokens. Roles are what diagnostics read: a rule asks "is this axis tokens?", never "is it called T?".
Nothing here imports torch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from enum import Enum

from shapetrace.errors import UsageError


class Role(str, Enum):
    """What an axis indexes. Rules ask for a role, never for a name. (A ``str``: it compares equal to
    its value, so ``--dims ctx:tokens=6`` and JSON read the same words.)"""

    BATCH = "batch"
    TOKENS = "tokens"
    FEATURES = "features"
    HEADS = "heads"
    HEAD_FEATURES = "head_features"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


_B, _T, _F, _H, _HF = Role.BATCH, Role.TOKENS, Role.FEATURES, Role.HEADS, Role.HEAD_FEATURES
#: role of each canonical name
ROLES = {
    "B": _B, "T": _T, "S": _T, "T_q": _T, "T_k": _T, "N": _T, "L": _T,
    "D": _F, "H": _H, "d_k": _HF, "H_kv": _H, "n_rep": _H,
    "D_kv": _F, "nW": _B, "B_max": _B,
    "Hp": _T, "Wp": _T, "Fp": _T,   # a convolution's grid of patches (rows, columns, frames)
}
#: the root of a width a module's own projection or embedding makes where no declared or derived name has
#: that size: an MLP's hidden width (4·D), a classifier's outputs, an embedding narrower than D (ALBERT's).
#: It has no role: what the features mean (a gate per head feature, angles, logits) no size says, so it
#: never clashes with another name where broadcasting lines it up; its pieces are unnamed.
PROJECTED = "F"
#: the root of the trailing axis of a tensor that enters the code as ``[B, T, width]`` at a width no declared or
#: derived name has (a trajectory's states, a table's fields, a series' variates: :mod:`.infer.seeds`): the
#: input's own features. Like ``F`` it has no role and its pieces are unnamed; a module's projection reading
#: it names the width it makes as a projection of features does (``D`` where that is the model's width).
INPUT_FEATURES = "F_in"
#: the widths a module made or took in that no declared name has: role-less features (``F``, ``F_in``)
OWN_WIDTHS = (PROJECTED, INPUT_FEATURES)
#: the widths a projection of a model's features may have, each read as features of that name
FEATURE_WIDTHS = ("D", "3*D", "2*D", "D_kv", "2*D_kv", "H*d_k", "3*H*d_k", "2*H*d_k", "2*d_k")
#: the axes of one grid of patches: each walks its own direction, so two of them never line up
GRID_AXES = frozenset({"Hp", "Wp", "Fp"})
#: roles a user may declare with ``name:role=size``
DECLARABLE = tuple(role.value for role in Role)
#: the canonical name for each accepted spelling
SPELLINGS = {
    **{s: "B" for s in ("batch", "batch_size", "bs", "b")},
    **{s: "T" for s in ("seq", "seq_len", "seqlen", "tokens", "n_ctx", "T_q", "t")},
    **{s: "S" for s in ("T_k", "src_len", "kv_len", "context", "memory", "mem", "s")},
    **{s: "D" for s in ("d_model", "dim", "hidden", "hidden_size", "embed_dim", "n_embd", "C", "E", "d")},
    **{s: "H" for s in ("heads", "n_head", "n_heads", "num_heads", "nh", "h")},
    **{s: "d_k" for s in ("head_dim", "dim_head", "d_head", "head_size", "hs", "d_kv", "dk")},
    **{s: "H_kv" for s in ("kv_heads", "n_kv_heads", "num_key_value_heads", "n_kv_head")},
    **{s: "nW" for s in ("windows", "num_windows")},
}
#: multipliers of fused projections: a width of 3·D is q, k and v side by side
STACK_FACTORS = {"qkv": 3, "kv": 2}
#: names whose axes index tokens or batch entries: mixing them with anything else is a bug
TOKEN_ROLES = frozenset({Role.BATCH, Role.TOKENS})


def canonical(name: str) -> str:
    """``seq_len`` -> ``T``; a canonical or unknown name is returned as it is."""
    return name if name in ROLES else SPELLINGS.get(name, name)


def canonical_dims(dims: Mapping[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """Sizes under canonical names, and the roles of any ``name:role`` keys.

    >>> canonical_dims({"batch": 2, "seq": 6, "d_model": 512, "heads": 8, "ctx:tokens": 4})
    ({'B': 2, 'T': 6, 'D': 512, 'H': 8, 'ctx': 4}, {'ctx': 'tokens'})
    """
    sizes: dict[str, int] = {}
    declared: dict[str, str] = {}
    for key, size in dims.items():
        name, _, role = str(key).partition(":")
        if role:
            if role not in DECLARABLE:
                raise UsageError(f"unknown role {role!r} in {key!r}: use one of {', '.join(DECLARABLE)}")
            declared[name] = role
        else:
            name = canonical(name)
        if name in sizes and sizes[name] != size:
            raise UsageError(f"{key}={size} names the same axis as {name}={sizes[name]} with another size")
        sizes[name] = size
    return sizes, declared


#: how attention code names the module that projects queries, keys, values, or several at once
PROJECTION_NAMES = {
    "q": ("q", "query", "wq", "toq", "qproj", "qlin", "linearq", "queries"),
    "k": ("k", "key", "wk", "tok", "kproj", "klin", "lineark", "keys"),
    "v": ("v", "value", "wv", "tov", "vproj", "vlin", "linearv", "values"),
    "qkv": ("qkv", "cattn", "wqkv", "toqkv", "qkvproj", "querykeyvalue", "inproj", "wpack"),
    "kv": ("kv", "wkv", "tokv", "kvproj", "keyvalue"),
}
#: the pieces a fused projection splits into, in order
FUSED_PARTS = {"qkv": ("q", "k", "v"), "kv": ("k", "v")}


@functools.lru_cache(maxsize=4096)
def projection_kind(module_name: str) -> str | None:
    """``self.q_proj`` -> ``q``; ``c_attn`` -> ``qkv``; ``to_kv`` -> ``kv``; anything else None.

    >>> [projection_kind(n) for n in ("q_proj", "attn.c_attn", "to_kv", "w_o", "mlp.fc1")]
    ['q', 'qkv', 'kv', None, None]
    """
    leaf = module_name.rsplit(".", 1)[-1].lower()
    squashed = "".join(ch for ch in leaf if ch.isalpha())
    for drop in ("proj", "linear", "lin", "layer", "dense"):
        if squashed not in PROJECTION_NAMES["qkv"]:
            squashed = squashed.replace(drop, "") if squashed.replace(drop, "") else squashed
    squashed = squashed.removeprefix("w").removeprefix("to") if squashed not in ("wq", "wk", "wv", "wqkv", "wkv") \
        else squashed
    for kind, spellings in PROJECTION_NAMES.items():
        if squashed in spellings or leaf.replace("_", "") in spellings:
            return kind
    return None
