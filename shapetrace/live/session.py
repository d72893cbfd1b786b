"""One live class from start to end: check the extra and the CSV path (before torch), trace the run, serve
it, and save every answer when the class ends or Ctrl-C stops it (never over an existing file)."""

from __future__ import annotations

import importlib.util
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shapetrace.errors import RunError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from shapetrace.live.classstate import LiveClass

#: The packages of the ``live`` extra, by import name.
EXTRA = ("starlette", "uvicorn", "websockets", "segno")
INSTALL = 'pip install "shapetrace[live]"'
MAX_SUFFIX = 1000


def check_extra() -> None:
    """A UsageError naming the install line when a package of the ``live`` extra is missing."""
    missing = [name for name in EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"shapetrace live needs the live extra ({', '.join(missing)} missing): {INSTALL}")


def check_port(port: int) -> int:
    if not 0 <= port < 65536:
        raise UsageError(f"--port {port}: use a port from 1 to 65535 (0: any free port)")
    return port


def check_host(host: str) -> str:
    """``--host``: an empty one bound every network (the OS reads '' as 0.0.0.0) without being asked."""
    if not host.strip():
        raise UsageError(f"--host {host!r} is empty: give 127.0.0.1 (this machine only) or 0.0.0.0 (every "
                         "network: phones in the room)")
    return host


def check_csv(path: str | None) -> Path | None:
    """``--csv PATH``: never an existing file, in a folder that exists."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--csv {path} is a folder; give a file name for the answers, e.g. "
                         f"{p / 'answers.csv'}")
    if p.exists() or p.is_symlink():
        raise UsageError(f"--csv {path}: the file exists; the answers never replace a file: pick another name")
    if not p.parent.is_dir():
        raise UsageError(f"--csv {path}: no folder {p.parent}")
    return p


def default_csv() -> Path:
    return Path(time.strftime("shapetrace-live-%Y%m%d-%H%M.csv"))


def save_answers(live: LiveClass, path: Path) -> Path:
    """Write the class's CSV to ``path``, or to ``name-2.csv``, ``name-3.csv``... when it exists: an
    existing file is never opened for writing (``x`` mode)."""
    text = live.csv_text()
    for n in range(1, MAX_SUFFIX + 1):
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        try:
            with open(candidate, "x", encoding="utf-8", newline="") as f:
                f.write(text)
            return candidate
        except FileExistsError:
            continue
    raise RunError(f"{path}: {MAX_SUFFIX} files of that name exist; the answers were not saved")


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound now: a port in use is one clear line, before the class is announced."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RunError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (pick another --port or --host)") \
            from None
    sock.set_inheritable(False)
    sock.listen(2048)  # listening from now: a phone that connects before Uvicorn starts waits in the backlog
    return sock


def join_url(host: str, port: int, code: str) -> str:
    """What a phone opens: the address students can reach, with the join code in the fragment (the page
    fills it in; a fragment is never sent to the server)."""
    from shapetrace.live.server import lan_address

    shown = lan_address() if host in ("0.0.0.0", "::", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/#{code}"


@dataclass
class Saver:
    """Saves the answers once: at the end of the class, or at Ctrl-C when it never ended."""

    live: LiveClass
    path: Path
    saved: Path | None = None

    def __call__(self) -> Path:
        if self.saved is None:
            self.saved = save_answers(self.live, self.path)
        return self.saved


def serve(live: LiveClass, sock: socket.socket, url: str, on_end: Callable[[], object]) -> None:
    """Serve the class on ``sock`` until Ctrl-C or SIGTERM (``kill``, a closing terminal session, a service
    manager): Uvicorn handles either signal, closes every socket, then raises it again once its own
    handlers are gone. Ctrl-C then arrives as a KeyboardInterrupt; SIGTERM's default would end the process
    there, before the answers are saved, so while the class runs SIGTERM raises one too: both are a clean
    stop, and the caller saves the answers the same way."""
    from shapetrace.live.server import LiveServer, uvicorn_server

    server = LiveServer(live, url, on_end=on_end)
    before = signal.signal(signal.SIGTERM, _interrupt)
    try:
        uvicorn_server(server.app).run(sockets=[sock])
    except KeyboardInterrupt:  # Uvicorn closed every socket, then passed the signal on: the class ended
        pass
    finally:
        signal.signal(signal.SIGTERM, before)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
