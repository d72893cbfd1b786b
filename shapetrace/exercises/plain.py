"""Values as bounded plain data: a JSON description plus raw bytes (no pickle, no zip, no code).

This is the only way values cross between the checker and its child, in both directions. A tensor is
described by its dtype, shape, stride and storage offset, and its storage is carried once as raw bytes
(tensors that share memory share it on arrival): the reader rebuilds it with ``torch.frombuffer`` and
``as_strided``, after checking
every number against hard caps (dimensions, elements, bytes, dtypes from a fixed list). Nothing is
decompressed and nothing is imported or called by name, so a forged description is refused, never run.

Other values: ``None``, bools, ints (64-bit), floats, complex numbers, short strings, torch dtypes (of
:data:`DTYPES`), devices and sizes, and lists/tuples of these nested at most :data:`MAX_DEPTH` deep.
Anything else is described by its type name only.
"""

from __future__ import annotations

import json
import math
import re

#: dtypes a tensor may have on the wire, with their element sizes.
DTYPES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
          "int8": 1, "uint8": 1, "bool": 1}
MAX_DIMS = 8
MAX_ITEMS = 64  # entries of a list or tuple
MAX_DEPTH = 4
MAX_TEXT = 4000
#: The most bytes one message's tensors may carry (the large memory probe has its own, planned, size).
MAX_TENSOR_BYTES = 8 << 20
#: Storages in one message, and bytes of its JSON part.
MAX_STORAGES = 64
MAX_JSON = 1 << 20
#: The most elements a tensor may hold: torch counts them in a signed 64-bit integer (a size past it raises
#: RuntimeError in ``as_strided``, not a refusal).
MAX_ELEMENTS = (1 << 63) - 1


class NotPlain(ValueError):
    """A description that is not a value this module writes: refused, never interpreted."""


def _span(shape: list[int], stride: list[int], offset: int) -> int:
    """Elements from the start of the storage to one past the last element the layout reaches."""
    if any(n == 0 for n in shape):
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


class Storages:
    """The storages a message's tensors live in, each sent once: tensors that share memory in the sender
    share it in the receiver, so "this output is a view of its input" is decided from layouts, not claims."""

    def __init__(self):
        self.index: dict[int, int] = {}
        self.chunks: list[bytes] = []
        self.total = 0

    def add(self, t) -> int | None:
        """The number of ``t``'s storage in this message (None: over the byte cap)."""
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in self.index:
            return self.index[key]
        nbytes = storage.nbytes()
        if self.total + nbytes > MAX_TENSOR_BYTES:
            return None
        import torch

        raw = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes() if nbytes else b""
        self.index[key] = len(self.chunks)
        self.chunks.append(raw)
        self.total += nbytes
        return self.index[key]


def describe(value, out: Storages, depth: int = 0) -> dict:
    """The description of ``value``; tensor storages are added to ``out`` (child and parent side)."""
    import torch

    from shapetrace.engine.sizes import SizeOf, SizeQuot, SizeSum

    if isinstance(value, torch.Tensor):
        try:
            return _describe_tensor(value, out)
        except Exception:   # a learner's tensor-like whose methods raise (or lie about its class): its type only
            return {"other": type(value).__name__[:100]}
    if type(value) in (SizeOf, SizeSum, SizeQuot):   # a size read while traced (``x.shape[-1]``), a sum or quotient
        value = int.__int__(value)
    if value is None or type(value) is bool:
        return {"v": value}
    torchish = _describe_torch_value(value, torch)
    if torchish is not None:
        return torchish
    if type(value) is int:
        return {"v": value} if -(1 << 63) <= value < (1 << 63) else {"other": "int"}
    if type(value) is float:
        return {"f": repr(value)}
    if type(value) is complex:
        return {"c": [repr(value.real), repr(value.imag)]}
    if type(value) is str:
        return {"s": value[:MAX_TEXT]}
    if type(value) in (list, tuple) and depth < MAX_DEPTH:
        return {type(value).__name__: [describe(v, out, depth + 1) for v in value[:MAX_ITEMS]]}
    return {"other": type(value).__name__[:100]}


def _describe_torch_value(value, torch) -> dict | None:
    """A dtype, device or size (None: not one of these)."""
    if type(value) is torch.dtype:
        name = str(value).removeprefix("torch.")
        return {"dtype": name} if name in DTYPES else {"other": f"dtype {name}"}
    if type(value) is torch.device:
        return {"device": str(value)[:40]}
    if type(value) is torch.Size:
        return {"size": [int(n) for n in value]} if len(value) <= MAX_ITEMS else {"other": "Size"}
    return None


def _describe_tensor(t, out: Storages) -> dict:
    import torch

    t = t.detach()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPES:
        return {"other": f"tensor {dtype}"}
    if t.device.type != "cpu":
        return {"other": f"tensor {dtype} on the {t.device.type} device"}
    if t.layout != torch.strided or t.dim() > MAX_DIMS:
        return {"other": f"tensor {dtype} of {t.dim()} axes, {str(t.layout).removeprefix('torch.')}"}
    where = out.add(t)
    if where is None:
        return {"other": f"tensor {dtype} of {t.untyped_storage().nbytes()} bytes"}
    return {"tensor": dtype, "shape": list(t.shape), "stride": list(t.stride()),
            "offset": int(t.storage_offset()), "storage": where}




class _Received:
    """The storages of a received message, rebuilt once each from their byte counts and the body."""

    def __init__(self, sizes, body: bytes, limit: int):
        if not isinstance(sizes, list) or len(sizes) > MAX_STORAGES:
            raise NotPlain("not a list of storages")
        sizes = [_int(n, 0, limit) for n in sizes]
        if sum(sizes) != len(body) or sum(sizes) > limit:
            raise NotPlain("the storages' bytes are missing or over the cap")
        import torch

        self.bases, at = [], 0
        for n in sizes:
            raw = bytearray(body[at:at + n])
            at += n
            self.bases.append(torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8))


def _int(x, low: int = 0, high: int = 1 << 40) -> int:
    if type(x) is not int or not low <= x <= high:
        raise NotPlain("a size that is not a bounded whole number")
    return x


def known_dtype(name) -> bool:
    """Whether a received dtype is one of :data:`DTYPES` by name (a list or an object is not, and is never
    looked up: it is unhashable)."""
    return type(name) is str and name in DTYPES


def checked_shape(shape: list) -> list[int]:
    """A received shape: whole sizes up to 2**31 whose product torch can count; :class:`NotPlain` else."""
    sizes = [_int(n, 0, 1 << 31) for n in shape]
    if math.prod(sizes) > MAX_ELEMENTS:
        raise NotPlain("a tensor of more elements than torch can count")
    return sizes


def _rebuild_tensor(desc: dict, got: _Received):
    import torch

    dtype = desc.get("tensor")
    if not known_dtype(dtype):
        raise NotPlain("a tensor of an unknown dtype")
    shape, stride = desc.get("shape"), desc.get("stride")
    if not (isinstance(shape, list) and isinstance(stride, list) and len(shape) == len(stride) <= MAX_DIMS):
        raise NotPlain("a tensor without a shape and stride")
    shape = checked_shape(shape)
    stride = [_int(s, 0, 1 << 40) for s in stride]
    offset = _int(desc.get("offset", 0))
    where = _int(desc.get("storage"), 0, len(got.bases) - 1) if got.bases else None
    if where is None:
        raise NotPlain("a tensor without a storage")
    base, size = got.bases[where], DTYPES[dtype]
    if base.numel() % size or _span(shape, stride, offset) * size > base.numel():
        raise NotPlain("a tensor whose layout reaches past its storage")
    flat = base.view(getattr(torch, dtype))
    return flat.as_strided(shape, stride, offset)


class Unsendable:
    """A value the child could not describe (a module, a function...): its type name only."""

    def __init__(self, type_name: str):
        self.type_name = str(type_name)[:100]

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def _decode(desc, body: _Received, depth: int):
    if not isinstance(desc, dict) or len(desc) not in range(1, 6):
        raise NotPlain("not a value description")
    if "tensor" in desc:
        return _rebuild_tensor(desc, body)
    if "v" in desc:
        v = desc["v"]
        if v is None or type(v) is bool or (type(v) is int and -(1 << 63) <= v < (1 << 63)):
            return v
        raise NotPlain("not a plain number")
    if "f" in desc:
        return _float(desc["f"])
    if "c" in desc:
        parts = desc["c"]
        if not isinstance(parts, list) or len(parts) != 2:
            raise NotPlain("not a complex number")
        return complex(_float(parts[0]), _float(parts[1]))
    if any(key in desc for key in ("dtype", "device", "size")):
        return _decode_torch_value(desc)
    if "s" in desc:
        if type(desc["s"]) is not str:
            raise NotPlain("not text")
        return desc["s"][:MAX_TEXT]
    for kind, make in (("list", list), ("tuple", tuple)):
        if kind in desc:
            items = desc[kind]
            if depth >= MAX_DEPTH or not isinstance(items, list) or len(items) > MAX_ITEMS:
                raise NotPlain("a list too long or too deep")
            return make(_decode(d, body, depth + 1) for d in items)
    if "other" in desc and type(desc["other"]) is str:
        return Unsendable(desc["other"])
    raise NotPlain("not a value description")


def _float(text) -> float:
    if type(text) is not str or len(text) > 40:
        raise NotPlain("not a float")
    try:
        return float(text)
    except ValueError:
        raise NotPlain("not a float") from None


_DEVICE = re.compile(r"[a-z]{2,10}(:[0-9]{1,3})?")


def _decode_torch_value(desc: dict):
    import torch

    if "dtype" in desc:
        if not known_dtype(desc["dtype"]):
            raise NotPlain("a dtype of an unknown name")
        return getattr(torch, desc["dtype"])
    if "device" in desc:
        text = desc["device"]
        if type(text) is not str or not _DEVICE.fullmatch(text):
            raise NotPlain("not a device")
        try:
            return torch.device(text)
        except (RuntimeError, ValueError):
            raise NotPlain("not a device") from None
    sizes = desc["size"]
    if not isinstance(sizes, list) or len(sizes) > MAX_ITEMS:
        raise NotPlain("not a size")
    return torch.Size([_int(n, -1, 1 << 40) for n in sizes])


def pack(values: dict, facts: dict | None = None) -> bytes:
    """One message: named values (tensors share storages) and JSON facts, as bytes.

    Layout: 4-byte length, a JSON object ``{"values": {name: description}, "storages": [byte counts],
    "facts": {...}}``, then the storages' bytes in order.
    """

    storages = Storages()
    descs = {str(k): describe(v, storages) for k, v in values.items()}
    text = json.dumps({"values": descs, "storages": [len(c) for c in storages.chunks], "facts": facts or {}},
                      default=str).encode()
    return len(text).to_bytes(4, "big") + text + b"".join(storages.chunks)


def unpack(body: bytes, limit: int = MAX_TENSOR_BYTES) -> tuple[dict, dict]:
    """``(values, facts)`` of :func:`pack`; :class:`NotPlain` for anything it would not write."""

    if len(body) < 4:
        raise NotPlain("a message without its length")
    n = int.from_bytes(body[:4], "big")
    if n > MAX_JSON or 4 + n > len(body):
        raise NotPlain("a message whose description is over the cap")
    from shapetrace.exercises.untrusted import Unreadable, loads

    try:  # bounded in depth, every string (text values, type names, facts) cleaned of control characters
        head = loads(memoryview(body)[4:4 + n])
    except Unreadable as exc:
        raise NotPlain(f"a description that is {exc}") from None
    if not isinstance(head, dict) or not isinstance(head.get("values"), dict):
        raise NotPlain("not a message")
    got = _Received(head.get("storages"), body[4 + n:], limit)
    facts = head.get("facts") if isinstance(head.get("facts"), dict) else {}
    return {str(k): _decode(d, got, 0) for k, d in head["values"].items()}, facts
