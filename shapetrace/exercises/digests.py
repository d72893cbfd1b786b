"""Digests of what the checker runs in the parent, recorded when the package is built (no torch).

The parent runs lesson code (each ``solution.py``, the reference and the known mistakes in
``exercise.toml``) and its own modules (the judge, the broken versions in ``shapetrace/attention/``,
the child's modules it sends over the pipe). The SHA-256 of each of them is recorded in
:data:`MANIFEST` (``shapetrace/exercises/DIGESTS.json``), written by
``python -m shapetrace.exercises.digests --write`` and committed with the files it covers; a test
(``tests/exercises/test_digests.py``) fails while it is stale. The manifest is read once per process and kept in
memory. Before every check every file is looked at again and compared with it (read and hashed again
where its inode, size or times changed since this process hashed it, or changed within the last
:data:`RACY_NS`), and the lesson code the parent is about to run is compiled from the very bytes that
were checked; any difference is
:class:`TamperedError` (one line, exit 1, naming the file and the command that records the digests
again) and nothing runs.

What it covers: every ``*.py`` of the package (keys ``shapetrace/...``) and every ``*.py`` and
``*.toml`` of the lessons folder (keys relative to it, so a copy of the lessons verifies as well as
the original). Someone who edits the lessons or the package in a checkout re-records the digests
with the command; the refusal says so.

Why a committed manifest and not a setuptools build step: in an editable install (``pip install -e .``,
how this project is used from a checkout) setuptools runs the build's subcommands once, at install
time, with ``editable_mode`` set, and the files are then edited in place; a digest taken then would be
stale at the first edit and nothing would say so. A manifest under version control ties the digests to
the reviewed commit, ships in the wheel as package data, and its staleness is a failing test.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from shapetrace.errors import ShapetraceError
from shapetrace.exercises.where import lessons_root

PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The manifest of recorded digests (package data, committed).
MANIFEST = Path(__file__).resolve().with_name("DIGESTS.json")
#: The command that records the digests again.
WRITE_COMMAND = "python -m shapetrace.exercises.digests --write"
#: The package files and the lesson files the parent reads code from.
PACKAGE_PATTERNS = ("*.py",)
LESSON_PATTERNS = ("*.py", "*.toml")


class TamperedError(ShapetraceError):
    """A file the checker runs differs from its recorded digest: the checker refuses to run (exit 1)."""

    exit_code = 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: A file whose times are this close to the moment it was hashed is hashed again on every read: a write in
#: the same clock tick as the hashing leaves its times unchanged (git's "racily clean" files).
RACY_NS = 2_000_000_000
#: Files hashed in this process, by real path: (their device, inode, size, mtime and ctime when read; their
#: bytes; their digest). Hashing the package and the lessons before every check was 40 ms of the parent's
#: 50 ms of CPU for a function exercise (cProfile, 20 checks); a file is read again only when one of those
#: changed, and nothing but the kernel sets ctime.
_hashed: dict[str, tuple[tuple[int, ...], bytes, str]] = {}


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read_hashed(real: str) -> tuple[bytes, str]:
    """A file's bytes and their digest, read again unless :data:`_hashed` holds them for its current stat."""
    got = _hashed.get(real)
    if got is not None and got[0] == _stamp(os.stat(real)):
        return got[1], got[2]
    with open(real, "rb") as file:
        st = os.fstat(file.fileno())
        stamp = _stamp(st)
        data = file.read()
    digest = sha256(data)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        _hashed[real] = (stamp, data, digest)
    return data, digest


#: Folders listed in this process, by path: (their device, inode, mtime and ctime when listed; the names in
#: them of folders that are not links, of plain files, and of everything else: links, pipes, ...). Each
#: check walks the package and the lessons twice (its digests, the modules the child imports), and asking
#: each name again whether it is a file or a link was a third of that walk's system calls. A folder's times
#: change whenever an entry is added, removed or renamed in it, so a folder is listed again where they
#: changed (or changed within :data:`RACY_NS` of the listing); every folder is still looked at (stat) on
#: every walk, every file found is stat'ed by its reader, and what a link points to is asked each time.
_listed: dict[str, tuple[tuple[int, ...], list[str], list[str], list[str]]] = {}


def _listing(folder: str) -> tuple[list[str], list[str], list[str]]:
    """(folders that are not links, plain files, every other name) in ``folder``."""
    st = os.stat(folder)
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    got = _listed.get(folder)
    if got is not None and got[0] == stamp:
        return got[1], got[2], got[3]
    folders, files, others = [], [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                kind = folders if entry.is_dir(follow_symlinks=False) else \
                    files if entry.is_file(follow_symlinks=False) else others
            except OSError:
                kind = others
            kind.append(entry.name)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        _listed[folder] = (stamp, folders, files, others)
    return folders, files, others


def walk(root: str):
    """``(folder, plain files, other names that are not folders)`` for ``root`` and every folder below it, top
    down, as ``os.walk(root)`` finds them (its file names split in two: a linked file or folder is among the
    other names, and a linked folder is not entered; a folder that cannot be read is skipped), each
    folder's listing kept while its times stay the same."""
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            folders, files, others = _listing(folder)
        except OSError:
            continue
        yield folder, files, others
        todo += [os.path.join(folder, name) for name in reversed(folders)]


def _files(root: Path, patterns: tuple[str, ...]) -> list[str]:
    """The files under ``root`` whose names match ``patterns``, as ``rglob`` finds them (a linked file is
    listed, a linked folder is not entered, nothing under ``__pycache__``), as strings in no order (the
    digests are a dictionary, compared and written by name)."""
    found = []
    for folder, files, others in walk(str(root)):
        if "__pycache__" in Path(folder).parts:
            continue
        found += [os.path.join(folder, n) for n in files if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
        found += [f for n in others if any(fnmatch.fnmatchcase(n, p) for p in patterns)
                  for f in [os.path.join(folder, n)] if os.path.isfile(f)]
    return found


def record(root: Path, patterns: tuple[str, ...], prefix: str = "") -> dict[str, str]:
    """``{prefix + path relative to root: sha256}`` of every file under ``root`` matching ``patterns``."""
    root = Path(root).resolve()
    out = {}
    for path in _files(root, patterns):
        out[prefix + _under(path, str(root))] = _read_hashed(path)[1]
    return out


def package_digests() -> dict[str, str]:
    """The package's files as they are now (keys ``shapetrace/...``)."""
    return record(PACKAGE_DIR, PACKAGE_PATTERNS, prefix=PACKAGE_DIR.name + "/")


def lesson_digests(lessons: Path) -> dict[str, str]:
    """A lessons folder's files as they are now (keys relative to the folder)."""
    return record(lessons, LESSON_PATTERNS)


def _refusal(name: str, what: str) -> TamperedError:
    return TamperedError(f"refusing to check: {name} {what} since its digest was recorded "
                         f"(shapetrace/exercises/DIGESTS.json); if you edited it, record the digests again with "
                         f"`{WRITE_COMMAND}`, else restore it or reinstall shapetrace")


_lock = threading.Lock()
#: The manifests read in this process, by path: read once, then kept (a later change of the file is unseen).
_loaded: dict[str, dict[str, dict[str, str]]] = {}


def manifest() -> dict[str, dict[str, str]]:
    """``{"package": {...}, "lessons": {...}}`` as recorded in :data:`MANIFEST` (read once per process)."""
    key = str(MANIFEST)
    with _lock:
        if key not in _loaded:
            _loaded[key] = _read_manifest(MANIFEST)
        return _loaded[key]


def _read_manifest(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        sections = {name: dict(data[name]) for name in ("package", "lessons")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = "is missing" if isinstance(exc, FileNotFoundError) else "cannot be read"
        raise TamperedError(f"refusing to check: the digests file shapetrace/exercises/DIGESTS.json {why}; "
                            f"record the digests with `{WRITE_COMMAND}`") from None
    if not all(isinstance(k, str) and isinstance(v, str) for s in sections.values() for k, v in s.items()):
        raise TamperedError(f"refusing to check: shapetrace/exercises/DIGESTS.json is not a digests file; "
                            f"record the digests with `{WRITE_COMMAND}`")
    return sections


def _compare(want: dict[str, str], now: dict[str, str], shown: str = "") -> None:
    for name in sorted(set(want) | set(now)):
        if want.get(name) != now.get(name):
            what = "appeared" if name not in want else "is gone" if name not in now else "changed"
            raise _refusal(shown + name, what)


def verify(lessons: Path) -> None:
    """Raise :class:`TamperedError` unless every recorded file is there, unchanged, and no new one appeared."""
    recorded = manifest()
    _compare(recorded["package"], package_digests())
    _compare(recorded["lessons"], lesson_digests(Path(lessons)), shown=_lessons_prefix(Path(lessons)))


def _lessons_prefix(lessons: Path) -> str:
    """How a lesson file is named in a refusal: relative to the lessons folder, named ``lessons/`` when it
    is the checkout's own."""
    return "lessons/" if Path(lessons).resolve() == PACKAGE_DIR.parent / "lessons" else ""


def _under(real: str, root: str) -> str | None:
    """``real`` relative to ``root`` (both real paths, as strings: pathlib's resolve and relative_to cost
    more than the hash, and every module the child imports is read through here), None outside it."""
    if real == root:
        return "."
    head = root.rstrip(os.sep) + os.sep
    return real[len(head):] if real.startswith(head) else None


def _key(real: str, lessons: Path | None) -> tuple[str, str]:
    """(section, key) of a file the parent reads code from, by its real path; ("", path) for a file it does not
    cover."""
    inside = _under(real, os.path.realpath(lessons)) if lessons is not None else None
    if inside is not None:
        return "lessons", inside
    inside = _under(real, str(PACKAGE_DIR))
    if inside is not None:
        return "package", PACKAGE_DIR.name + "/" + inside
    return "", real


#: Each verified file's text, by its digest: decoded once (the fork server's key compares the payload's
#: texts before every check: the same objects compare at once).
_texts: dict[str, str] = {}


def verified_text(path: Path | str, lessons: Path | None = None, resolved: bool = False) -> str:
    """The text of a recorded file, read once and checked against its digest (what runs is what was checked).
    ``resolved``: ``path`` is its own real path (found by walking a resolved folder, and not a link)."""
    real = str(path) if resolved else os.path.realpath(path)
    section, key = _key(real, lessons)
    want = manifest().get(section, {}).get(key)
    data, digest = _read_hashed(real)
    shown = (_lessons_prefix(lessons) if section == "lessons" else "") + key
    if want is None:
        raise _refusal(shown, "is not a recorded file, or appeared")
    if digest != want:
        raise _refusal(shown, "changed")
    text = _texts.get(digest)
    if text is None:
        text = _texts[digest] = data.decode("utf-8")
    return text


def manifest_text(lessons: Path) -> str:
    """The manifest for the package and ``lessons`` as they are now: sorted, one file a line (merges cleanly)."""
    data = {"package": package_digests(), "lessons": lesson_digests(lessons)}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def stale(lessons: Path, path: Path | None = None) -> list[str]:
    """The files whose digests in the manifest at ``path`` differ from the files now ('' list when current)."""
    try:
        recorded = _read_manifest(path or MANIFEST)
    except TamperedError as exc:
        return [str(exc)]
    now = {"package": package_digests(), "lessons": lesson_digests(lessons)}
    return [f"{section}: {name}" for section in ("package", "lessons")
            for name in sorted(set(recorded[section]) | set(now[section]))
            if recorded[section].get(name) != now[section].get(name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shapetrace.exercises.digests",
                                     description="Record (--write) or check (--check) the digests of the files "
                                                 "the exercise checker runs.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"write {MANIFEST.name} for the files as they are now")
    mode.add_argument("--check", action="store_true", help="exit 1 when the recorded digests are stale")
    parser.add_argument("--lessons", type=Path, default=None,
                        help="the lessons folder (default: $SHAPETRACE_LESSONS or the checkout's lessons/)")
    args = parser.parse_args(argv)
    lessons = Path(args.lessons or lessons_root()).resolve()
    if not (lessons / "index.toml").is_file():
        print(f"error: no lessons at {lessons} (no index.toml)", file=sys.stderr)
        return 2
    if args.check:
        changed = stale(lessons)
        for line in changed:
            print(line)
        print(f"{len(changed)} stale digests" + (f"; run `{WRITE_COMMAND}`" if changed else ""))
        return 1 if changed else 0
    temp = MANIFEST.with_name(MANIFEST.name + ".tmp")
    temp.write_text(manifest_text(lessons), encoding="utf-8")
    os.replace(temp, MANIFEST)  # all or nothing: an interrupted write leaves the old manifest
    with _lock:
        _loaded.pop(str(MANIFEST), None)
    print(f"recorded the digests in {MANIFEST} (lessons: {lessons})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
