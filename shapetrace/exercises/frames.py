"""The child's channel to the parent: length-prefixed frames (no torch, no Rich).

A frame is ``MAGIC``, a 4-byte header length, a JSON header (``{"kind": ...}``), an 8-byte body length
and the body (a :mod:`.plain` message: JSON and raw storage bytes, no pickle, nothing compressed).
Every length is checked against a cap before anything is buffered, and a header is read by
:func:`.untrusted.loads` (its depth capped, its strings cleaned). Nothing in a frame is a verdict: the
parent decides from the data.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from shapetrace.exercises.untrusted import Unreadable, checked_header, loads

MAGIC = b"STF1"
MAX_HEADER = 4096
#: The deepest a header nests (``{"kind": "probe", "shape": [...]}`` is 2 levels).
MAX_HEADER_DEPTH = 4
#: The largest body the parent buffers (a message's storages and JSON, plus room); the memory probe's
#: raw output is allowed more, explicitly (``Decoder(max_body=...)``).
MAX_BODY = 10 << 20


@dataclass
class Frame:
    header: dict
    body: bytes


class BadFrame(ValueError):
    """The bytes on the channel are not frames (something other than the checker wrote there)."""


def head(header: dict, body_len: int) -> bytes:
    """A frame's bytes up to its body (a large body is then written as it is, without a copy)."""
    text = json.dumps(header).encode()
    return MAGIC + struct.pack(">I", len(text)) + text + struct.pack(">Q", body_len)


def encode(header: dict, body: bytes = b"") -> bytes:
    return head(header, len(body)) + body


class Decoder:
    """Feed bytes as they arrive; complete frames come out in order."""

    def __init__(self, max_body: int = MAX_BODY):
        self.max_body = max_body
        self.buf = bytearray()
        self.need = 0  # bytes the frame being read needs in all (a large body arrives in many reads)

    def feed(self, data: bytes) -> Iterator[Frame]:
        """Each complete frame as it is parsed: the good frames before a bad one in the same read still
        come out (the bad one raises :class:`BadFrame` when the loop reaches it)."""
        self.buf += data
        if len(self.buf) < self.need:
            return
        while (frame := self._next()) is not None:
            yield frame

    def _next(self) -> Frame | None:
        if len(self.buf) < 8:
            if not MAGIC.startswith(bytes(self.buf[:4])):
                raise BadFrame("not a frame")
            return None
        if bytes(self.buf[:4]) != MAGIC:
            raise BadFrame("not a frame")
        (hlen,) = struct.unpack(">I", self.buf[4:8])
        if hlen > MAX_HEADER:
            raise BadFrame("header too long")
        if len(self.buf) < 8 + hlen + 8:
            return None
        try:  # bounded in depth, every string cleaned: the header came from learner code's side
            header = loads(self.buf[8:8 + hlen], MAX_HEADER_DEPTH)
        except Unreadable as exc:
            raise BadFrame(f"a header that is {exc}") from None
        if not isinstance(header, dict):
            raise BadFrame("header is not an object")
        try:  # typed: the fields the checker reads have the child's types
            checked_header(header)
        except Unreadable as exc:
            raise BadFrame(str(exc)) from None
        (blen,) = struct.unpack(">Q", self.buf[8 + hlen:16 + hlen])
        if blen > self.max_body:
            raise BadFrame(f"a frame of {blen} bytes (the cap is {self.max_body})")
        end = 16 + hlen + blen
        if len(self.buf) < end:
            self.need = end
            return None
        body = bytes(self.buf[16 + hlen:end])
        del self.buf[:end]
        self.need = 0
        return Frame(header, body)
