"""A pytest plugin that measures where the suite's time goes, file by file (``-n 0`` only).

    SUITE_PROFILE=/tmp/prof python -m pytest -n 0 -p benchmarks.suite_profile tests/...

For each test file: its wall, the test process's own CPU, the CPU of the children it reaped
(``RUSAGE_CHILDREN``), and, from a sampler process that reads /proc every 0.2 s, every process below
pytest or carrying this run's tag in its environment (a tmux server, Chromium, a sandboxed child that
nobody reaps): its own CPU at its last sighting, and whether it mapped libtorch (an interpreter that
imported torch). Processes that live under 0.2 s are missed by the sampler (their CPU is in the
reaped figure when their parent waits for them). Writes ``$SUITE_PROFILE/files.tsv`` and
``$SUITE_PROFILE/procs.tsv``.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

TAG = "SHAPETRACE_SUITE_PROFILE_TAG"
HZ = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, float, int] | None:
    """(ppid, own CPU seconds, start time in ticks) of ``pid``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / HZ, int(fields[19])


def _tagged(pid: str, tag: str) -> bool:
    try:
        return f"{TAG}={tag}".encode() in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _maps_torch(pid: str) -> bool:
    try:
        return "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _sample(root: int, tag: str, out: Path, current: Path) -> None:
    """Run until ``root`` is gone: one row per process seen below ``root`` or with the tag."""
    seen: dict[tuple[int, int], dict] = {}
    foreign: set[tuple[int, int]] = set()
    me = os.getpid()
    while _stat(str(root)) is not None:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != me:
                s = _stat(entry)
                if s:
                    stats[int(entry)] = s
        ours = {root}
        changed = True
        while changed:
            changed = False
            for pid, (ppid, _, _) in stats.items():
                if pid not in ours and ppid in ours:
                    ours.add(pid)
                    changed = True
        try:
            test = current.read_text()
        except OSError:
            test = "?"
        for pid, (_, cpu, start) in stats.items():
            key = (pid, start)
            if key in seen:
                row = seen[key]
                row["cpu"] = cpu
                if not row["torch"] and row["looks"] < 3:
                    row["looks"] += 1
                    row["torch"] = _maps_torch(str(pid))
                continue
            if key in foreign:
                continue
            if pid == root or not (pid in ours or _tagged(str(pid), tag)):
                foreign.add(key)
                continue
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                cmd = " ".join(raw.replace("\0", " ").split())[:160]
            except OSError:
                cmd = "?"
            seen[key] = {"cpu": cpu, "torch": _maps_torch(str(pid)), "looks": 0, "test": test, "cmd": cmd}
        time.sleep(0.2)
        with open(out, "w") as f:
            for (pid, _), row in seen.items():
                f.write(f"{pid}\t{row['test']}\t{row['cpu']:.2f}\t{int(row['torch'])}\t{row['cmd']}\n")


class _Profile:
    def __init__(self, folder: Path):
        self.folder = folder
        self.current = folder / "current"
        self.rows: dict[str, list[float]] = {}
        self.file = None
        self.mark = None

    def _now(self):
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.perf_counter(), me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime

    def _close(self):
        if self.file is not None:
            now = self._now()
            row = self.rows.setdefault(self.file, [0.0, 0.0, 0.0, 0])
            for i in range(3):
                row[i] += now[i] - self.mark[i]
            self._write()

    def _write(self):
        with open(self.folder / "files.tsv", "w") as f:
            for name, (wall, own, kids, count) in self.rows.items():
                f.write(f"{name}\t{wall:.2f}\t{own:.2f}\t{kids:.2f}\t{count}\n")

    def pytest_runtest_logstart(self, nodeid, location):
        name = nodeid.split("::")[0]
        self.current.write_text(name)
        if name != self.file:
            self._close()
            self.file, self.mark = name, self._now()
        self.rows.setdefault(name, [0.0, 0.0, 0.0, 0])[3] += 1

    def pytest_sessionfinish(self):
        self._close()


def pytest_configure(config):
    folder = os.environ.get("SUITE_PROFILE")
    if not folder or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tag = str(os.getpid())
    os.environ[TAG] = tag
    profile = _Profile(folder)
    profile.current.write_text("(collection)")
    root = os.getpid()
    if os.fork() == 0:
        os.setsid()
        try:
            _sample(root, tag, folder / "procs.tsv", profile.current)
        finally:
            os._exit(0)
    config.pluginmanager.register(profile, "suite-profile")


if __name__ == "__main__":
    sys.exit("a pytest plugin: python -m pytest -n 0 -p benchmarks.suite_profile (SUITE_PROFILE=folder)")
