"""The live classroom's server: Starlette on Uvicorn, one WebSocket per page.

Pages and every asset are served from this package (no CDN: the class works offline). Students join with
the join code, get a secret token (kept in the page's localStorage, so a reload or a dropped network keeps
their name and answers) and answer over their socket; the projector watches; the teacher's page sends the
teacher key (from the projector URL's fragment, never sent in a request line) and alone may move the class.

Safe by default: torch's answer is in no message before the teacher reveals it (:meth:`LiveClass.public_state`);
every message is size-capped (Uvicorn closes a socket whose message exceeds :data:`MAX_MESSAGE` with 1009) and
rate-limited per socket (a flood gets refusals, then the socket is closed with 1008); joins are rate-limited
for the whole class; names and answers are stored as text and every page shows them with ``textContent``;
the pages' Content-Security-Policy allows only this server's own scripts.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketState

from shapetrace.live.classstate import LiveClass, Refused, Student

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

MAX_MESSAGE = 16 * 1024        #: bytes of one WebSocket message (Uvicorn closes the socket above it: 1009)
RATE, BURST = 4.0, 12.0        #: messages a second per socket, and the burst allowed
FLOOD_CLOSE = 40               #: refusals for rate before the socket is closed (1008)
JOIN_RATE, JOIN_BURST = 100.0, 400.0  #: joins a second for the whole class (200 phones at once fit the burst)
MAX_SOCKETS = 1200
SEND_TIMEOUT = 3.0             #: seconds a slow page may take to take one message before it is dropped
COUNT_EVERY = 0.05             #: seconds between two answer counts sent to the projector
ASSETS = {"student.js": "text/javascript", "projector.js": "text/javascript", "live.css": "text/css"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class Bucket:
    """A token bucket: ``take`` is True while the rate allows."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = burst, clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@dataclass(eq=False)
class Conn:
    ws: WebSocket
    bucket: Bucket = field(default_factory=lambda: Bucket(RATE, BURST))
    student: Student | None = None
    projector: bool = False
    teacher: bool = False
    refusals: int = 0


def _asset(name: str) -> str:
    return files("shapetrace.live").joinpath("assets", name).read_text(encoding="utf-8")


def _headers(kind: str) -> dict[str, str]:
    return {"content-type": kind, "content-security-policy": CSP, "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer", "cache-control": "no-store", "x-frame-options": "DENY"}


class LiveServer:
    """The ASGI app of one class (``.app``) and its sockets."""

    def __init__(self, live: LiveClass, join_url: str, on_end: Callable[[], None] | None = None):
        self.live, self.join_url, self.on_end = live, join_url, on_end
        self.conns: set[Conn] = set()
        self.joins = Bucket(JOIN_RATE, JOIN_BURST)
        self._count_pending = False
        self._assets = {name: _asset(name) for name in ASSETS}
        self._pages = {name: _asset(name) for name in ("student.html", "projector.html")}
        self._qr = _qr_svg(join_url)
        self.app = Starlette(routes=[
            Route("/", self.student_page), Route("/projector", self.projector_page),
            Route("/static/{name}", self.asset), Route("/qr.svg", self.qr),
            WebSocketRoute("/ws", self.socket)])

    # -- pages ----------------------------------------------------------------------------------------

    async def student_page(self, request) -> Response:
        return Response(self._pages["student.html"], headers=_headers("text/html; charset=utf-8"))

    async def projector_page(self, request) -> Response:
        return Response(self._pages["projector.html"], headers=_headers("text/html; charset=utf-8"))

    async def asset(self, request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return Response("not found", status_code=404, headers=_headers("text/plain"))
        return Response(self._assets[name], headers=_headers(ASSETS[name] + "; charset=utf-8"))

    async def qr(self, request) -> Response:
        return Response(self._qr, headers=_headers("image/svg+xml"))

    # -- sockets --------------------------------------------------------------------------------------

    async def socket(self, ws: WebSocket) -> None:
        origin, host = ws.headers.get("origin"), ws.headers.get("host", "")
        if origin is not None and origin.split("://", 1)[-1] != host:  # another site's page in the browser
            await ws.close(code=1008)
            return
        if len(self.conns) >= MAX_SOCKETS:
            await ws.close(code=1013)
            return
        await ws.accept()
        conn = Conn(ws)
        self.conns.add(conn)
        try:
            await self._serve(conn)
        finally:
            self.conns.discard(conn)

    async def _serve(self, conn: Conn) -> None:
        while True:
            message = await conn.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            if not conn.bucket.take():
                conn.refusals += 1
                if conn.refusals > FLOOD_CLOSE:
                    await conn.ws.close(code=1008)
                    return
                await self._refuse(conn, "too many messages: wait a second")
                continue
            text = message.get("text")
            try:
                data = json.loads(text) if text is not None and len(text) <= MAX_MESSAGE else None
            except ValueError:
                data = None
            if not isinstance(data, dict):
                await self._refuse(conn, "not a message this class reads")
                continue
            try:
                await self._handle(conn, data)
            except Refused as exc:
                await self._refuse(conn, str(exc), data.get("t"))

    async def _refuse(self, conn: Conn, why: str, about: Any = None) -> None:
        about = about if isinstance(about, str) else None
        await self._send(conn, json.dumps({"t": "refused", "why": why, "about": about}))

    async def _handle(self, conn: Conn, data: dict[str, Any]) -> None:
        kind = data.get("t")
        if kind == "join" or kind == "resume":
            await self._student(conn, data)
        elif kind == "answer":
            await self._answer(conn, data)
        elif kind == "watch" or kind == "teacher":
            if kind == "teacher" and not self.live.is_teacher(data.get("key")):
                raise Refused("wrong teacher key")
            conn.projector, conn.teacher = True, kind == "teacher"
            await self._send(conn, self._projector_text())
        elif kind == "go":
            if not conn.teacher:
                raise Refused("only the teacher moves the class")
            self.live.go(data.get("action"))
            await self.broadcast()
            if self.live.ended and self.on_end is not None:
                self.on_end()
        else:
            raise Refused("not a message this class reads")

    async def _student(self, conn: Conn, data: dict[str, Any]) -> None:
        if conn.student is not None or conn.projector:
            raise Refused("this page has joined already")
        if data["t"] == "join":
            if not self.joins.take():
                raise Refused("too many joins at once: try again in a second")
            conn.student = self.live.join(data.get("name"), data.get("code"))
        else:
            conn.student = self.live.student(data.get("token"))
        s = conn.student
        await self._send(conn, json.dumps({"t": "welcome", "token": s.token, "name": s.name, "id": s.id}))
        await self._send(conn, self._student_text(s, self._student_base()))

    async def _answer(self, conn: Conn, data: dict[str, Any]) -> None:
        if conn.student is None:
            raise Refused("join the class first")
        response = self.live.answer(conn.student.token, data.get("moment"), data.get("shape"), data.get("memory"))
        await self._send(conn, json.dumps({"t": "ack", "moment": data.get("moment"), "shown": response.shown,
                                           "memory": response.memory}))
        self._schedule_count()

    # -- sending --------------------------------------------------------------------------------------

    def _projector_text(self) -> str:
        return json.dumps(dict(self.live.public_state(), join=self.join_url, code=self.live.join_code))

    def _student_base(self) -> dict[str, Any]:
        state = self.live.public_state()
        if "reveal" in state:  # a phone needs torch's answer, not the projector's diagram and histogram
            state["reveal"] = {k: v for k, v in state["reveal"].items() if k not in ("diagram", "histogram")}
        return state

    def _student_text(self, student: Student, base: dict[str, Any]) -> str:
        return json.dumps(dict(base, you=self.live.own_state(student)))

    async def broadcast(self) -> None:
        """Every page gets the class's state: the projector first (the room is looking at it), then each
        student with their own answer and result."""
        conns = list(self.conns)
        projector = self._projector_text()
        await asyncio.gather(*(self._send(c, projector) for c in conns if c.projector))
        base = self._student_base()
        await asyncio.gather(*(self._send(c, self._student_text(c.student, base))
                               for c in conns if c.student is not None))

    def _schedule_count(self) -> None:
        if not self._count_pending:
            self._count_pending = True
            asyncio.get_running_loop().call_later(COUNT_EVERY, lambda: asyncio.ensure_future(self._send_count()))

    async def _send_count(self) -> None:
        self._count_pending = False
        live = self.live
        text = json.dumps({"t": "count", "moment": live.current, "count": live.answered(live.current),
                           "students": len(live.students)})
        await asyncio.gather(*(self._send(c, text) for c in list(self.conns) if c.projector))

    async def _send(self, conn: Conn, text: str) -> None:
        if conn.ws.application_state != WebSocketState.CONNECTED:
            return
        try:
            await asyncio.wait_for(conn.ws.send_text(text), SEND_TIMEOUT)
        except Exception:  # a page gone or too slow: it reconnects and resumes with its token
            self.conns.discard(conn)


def _qr_svg(url: str) -> str:
    import segno

    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="svg", scale=8, border=2, dark="#000000", light="#ffffff",
                                    xmldecl=False)
    return out.getvalue().decode("utf-8")


def qr_terminal(url: str) -> str:
    """The join URL as a QR code of text (half blocks), for the terminal."""
    import segno

    out = io.StringIO()
    segno.make(url, error="m").terminal(out=out, compact=True, border=2)
    return out.getvalue()


def lan_address() -> str:
    """This machine's address on its network (what a phone in the room can reach), or 127.0.0.1."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # a UDP connect sends nothing: it only picks the route
        return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


def uvicorn_server(app):
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2,
                            ws_max_size=MAX_MESSAGE, lifespan="off", ws="websockets-sansio")
    return uvicorn.Server(config)


class Running:
    """A class served from a thread on free ports of 127.0.0.1 (tests and benchmarks); it stops itself
    after ``stop_after`` seconds whatever happens, and on :meth:`stop`. ``origins`` extra ports serve the
    same class, each its own origin to a browser (its own localStorage: a page per port behaves as a page
    on its own device, in one browser context)."""

    def __init__(self, server: LiveServer, stop_after: float = 120.0, origins: int = 0):
        self.socks = [self._bound() for _ in range(1 + origins)]
        self.ports = [sock.getsockname()[1] for sock in self.socks]
        self.port = self.ports[0]
        self.server = server
        self.uvicorn = uvicorn_server(server.app)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.timer = threading.Timer(stop_after, self.stop)
        self.timer.daemon = True

    @staticmethod
    def _bound() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        return sock

    def _run(self) -> None:
        asyncio.run(self.uvicorn.serve(sockets=self.socks))

    def __enter__(self) -> Running:
        self.thread.start()
        self.timer.start()
        deadline = time.monotonic() + 20
        while not self.uvicorn.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.uvicorn.started:
            raise RuntimeError("the live server did not start")
        return self

    def stop(self) -> None:
        self.uvicorn.should_exit = True

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.stop()
        self.thread.join(10)
        for sock in self.socks:
            sock.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def origin(self, n: int) -> str:
        """The address of extra origin ``n`` (0-based)."""
        return f"http://127.0.0.1:{self.ports[1 + n]}"
