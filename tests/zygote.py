"""A zygote: one interpreter that has imported torch once and forks a fresh child for each ``python -c``.

A test that runs a script in a process of its own (because the script patches torch, or reads the
process's memory) paid an interpreter and a torch import each time: about 2.4 CPU-s here, most of the
cost of such a test. :class:`Zygote` starts one interpreter per pytest worker, imports the modules it
is given, and then only forks: each call's child is a process of its own (its own memory, its own
patches, its own exit), set up as ``python -c CODE ARGS`` would be (``sys.argv``, the current folder,
a fresh ``__main__``, stdin, stdout and stderr its own pipes), and it ends as an interpreter ends (its
``atexit`` functions run, an uncaught exception prints its traceback and exits 1). What differs from a
fresh interpreter: the preloaded modules are already in ``sys.modules`` (list only modules the script
imports itself), the environment is the one the zygote started with, and objects still alive at the
end are not finalised one by one (``__del__``). So it is for scripts where none of that is what the
test proves; startup, imports, signals and the environment keep ``subprocess``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence

#: The zygote's own program: import the preloads, then one fork per request, reporting the child's pid
#: and then its exit status. The child runs its code in a cleared ``__main__`` and ends as ``python -c``
#: ends (an exit status, a traceback without the zygote's frames, non-daemon threads joined, ``atexit``
#: functions run, stdout and stderr flushed), then leaves with ``os._exit``, as multiprocessing's
#: forked children do: tearing down every module in a forked copy of torch copies the pages it touches
#: (2 s of a 2.4 s fresh start, measured) and proves nothing a test asks.
SERVER = r'''
import atexit, gc, importlib, json, os, signal, socket, sys, threading


def run_child(code, main, os=os, sys=sys, atexit=atexit, signal=signal, threading=threading):
    try:
        exec(code, main)
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException as exc:  # as the interpreter reports it, without this frame
        exc.__traceback__ = exc.__traceback__.tb_next
        sys.excepthook(type(exc), exc, exc.__traceback__)
        status = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if status == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status & 0xFF)


def serve(main, json=json, os=os, socket=socket, sys=sys, run_child=run_child):
    sock = socket.socket(fileno=int(sys.argv[1]))
    for name in sys.argv[2:]:
        importlib.import_module(name)
    gc.freeze()  # the children share these pages: a collection in one does not copy them
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            sock.close()
            for number, fd in enumerate(fds):
                os.dup2(fd, number)
                os.close(fd)
            os.chdir(request["cwd"])
            if request["env"] is not None:
                os.environ.clear()
                os.environ.update(request["env"])
            sys.argv = [request["argv0"], *request["args"]]
            builtins = main["__builtins__"]
            main.clear()
            main.update(__name__="__main__", __doc__=None, __package__=None, __loader__=None, __spec__=None,
                        __annotations__={}, __builtins__=builtins)
            run_child(compile(request["code"], "<string>", "exec"), main)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode())


serve(globals())
'''


class Zygote:
    """One interpreter that has imported ``preload``; :meth:`run` forks a child of it per call."""

    def __init__(self, preload: Sequence[str] = ("torch",), env: dict | None = None):
        self.preload = tuple(preload)
        self.env = dict(os.environ if env is None else env)
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(theirs.fileno()), *self.preload],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=self.env)
        theirs.close()
        self.lock = threading.Lock()

    def _answer(self, timeout: float | None) -> dict:
        self.sock.settimeout(timeout)
        try:
            got = self.sock.recv(4096)
        finally:
            self.sock.settimeout(None)
        if not got:
            raise RuntimeError(f"the zygote (preloading {', '.join(self.preload)}) stopped: "
                               f"exit {self.proc.poll()}")
        return json.loads(got)

    def run(self, code: str, *args: str, input: str | None = None, cwd=None, env: dict | None = None,
            timeout: float = 300, argv0: str = "-c", shown: list[str] | None = None) -> subprocess.CompletedProcess:
        """``python -c CODE ARGS`` with text stdout and stderr captured, as ``subprocess.run`` returns it.

        ``env``: the child's whole environment, set before its code runs (the zygote's own where None);
        a variable the interpreter reads only as it starts (``PYTHON*``) cannot take a new value in a
        fork, so one that differs from the zygote's raises ValueError (use ``subprocess`` for it).
        ``argv0``: the child's ``sys.argv[0]``; ``shown``: the command line the result names."""
        argv = shown or [sys.executable, "-c", code, *args]
        if env is not None:
            started = {k: v for k, v in self.env.items() if k.startswith("PYTHON")}
            wanted = {k: v for k, v in env.items() if k.startswith("PYTHON")}
            if started != wanted:
                raise ValueError(f"a fork cannot start with other PYTHON* variables: {wanted} (zygote: {started})")
        with self.lock:
            pipes = [os.pipe() for _ in range(3)]
            theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
            request = {"code": code, "args": list(args), "cwd": os.fspath(cwd or os.getcwd()), "env": env,
                       "argv0": argv0}
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], theirs)
            finally:
                for fd in theirs:
                    os.close(fd)
            with open(pipes[0][1], "w") as stdin, open(pipes[1][0]) as stdout, open(pipes[2][0]) as stderr:
                pid = self._answer(60)["pid"]
                try:
                    out, err = _Child(pid, stdin, stdout, stderr).communicate(input, timeout, argv)
                finally:  # (after a timeout, the status of the child it killed)
                    status = self._answer(timeout + 60)["code"]
        return subprocess.CompletedProcess(argv, status, out, err)

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Child:
    """The pipes of one forked child: what ``Popen.communicate`` does, reading both streams on threads."""

    def __init__(self, pid: int, stdin, stdout, stderr):
        self.pid, self.stdin, self.streams = pid, stdin, (stdout, stderr)

    def communicate(self, input: str | None, timeout: float, argv: list[str]) -> tuple[str, str]:
        read = ["", ""]

        def drain(i: int) -> None:
            read[i] = self.streams[i].read()

        threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        try:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        except BrokenPipeError:
            pass
        for t in threads:
            t.join(timeout)
            if t.is_alive():
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                raise subprocess.TimeoutExpired(argv, timeout, read[0], read[1])
        return read[0], read[1]
