"""Digests of the solutions, the judge and the broken versions: a changed file and the checker refuses to run.

The digests are recorded in shapetrace/exercises/DIGESTS.json (``python -m shapetrace.exercises.digests
--write``); one test fails while that file is stale. Each other test works on its own copy of lessons/
(a faithful copy verifies: lesson files are named relative to their folder), tampers with it, and sees
the refusal: one line, exit 1, naming the file and the command, nothing checked. One real check in the
sandbox shows the same copy passes before it is touched, and one shows that recording the digests
again (what a learner who edits a lesson in a checkout does) lets the edited copy be checked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shapetrace.exercises import digests
from shapetrace.exercises.checker import Job, check_job
from shapetrace.exercises.content import lessons_root, load
from shapetrace.exercises.digests import TamperedError

MESSAGE = ("since its digest was recorded (shapetrace/exercises/DIGESTS.json); if you edited it, record the "
           "digests again with `python -m shapetrace.exercises.digests --write`, else restore it or reinstall "
           "shapetrace")


@pytest.fixture
def lessons(tmp_path) -> Path:
    """A fresh copy of lessons/, loaded once before the test touches it."""
    root = tmp_path / "lessons"
    shutil.copytree(lessons_root(), root)
    load(root)
    return root.resolve()


def _split(lessons: Path) -> Path:
    return load(lessons).exercise("split-heads").folder


def _refusal(lessons: Path, exercise: str = "split-heads") -> str:
    learner = lessons.parent / "split_heads.py"
    learner.write_text((_split(lessons) / "solution.py").read_text())
    with pytest.raises(TamperedError) as caught:
        check_job(Job(exercise, str(learner)), lessons, time_limit=3, memory_mb=512)
    return str(caught.value)


def test_the_untouched_copy_passes_then_a_changed_solution_is_refused(lessons):
    learner = lessons.parent / "split_heads.py"
    solution = _split(lessons) / "solution.py"
    learner.write_text(solution.read_text())
    v = check_job(Job("split-heads", str(learner)), lessons, time_limit=5, memory_mb=512)
    assert v["verdict"] == "pass", v
    solution.write_text(solution.read_text() + "\nopen('/tmp/owned', 'w')\n")  # code the parent would run
    assert _refusal(lessons) == f"refusing to check: 01_split_heads/split-heads/solution.py changed {MESSAGE}"


def test_a_changed_exercise_toml_is_refused(lessons):
    toml = _split(lessons) / "exercise.toml"
    toml.write_text(toml.read_text().replace("title =", "title = 'x'\n#", 1))
    assert _refusal(lessons) == f"refusing to check: 01_split_heads/split-heads/exercise.toml changed {MESSAGE}"


def test_every_exercise_in_the_folder_is_covered_not_a_fixed_list(lessons):
    """A file in any exercise folder (another lesson's too) counts; so does a new or a removed file."""
    last = load(lessons).exercises[-1]
    (last.folder / "solution.py").write_bytes((last.folder / "solution.py").read_bytes() + b"#")
    rel = last.folder.relative_to(lessons)
    assert _refusal(lessons) == f"refusing to check: {rel}/solution.py changed {MESSAGE}"
    (last.folder / "solution.py").write_bytes((last.folder / "solution.py").read_bytes()[:-1])
    (lessons / "01_split_heads" / "extra.py").write_text("x = 1\n")
    assert _refusal(lessons) == f"refusing to check: 01_split_heads/extra.py appeared {MESSAGE}"
    (lessons / "01_split_heads" / "extra.py").unlink()
    (_split(lessons) / "starter.py").unlink()
    assert _refusal(lessons) == f"refusing to check: 01_split_heads/split-heads/starter.py is gone {MESSAGE}"


def test_a_package_file_that_differs_from_its_digest_is_refused(lessons, monkeypatch):
    """The judge and the broken versions are the package's files: a recorded digest that no longer matches
    (here the record is changed, not the installed package) stops the check before anything runs."""
    recorded = digests.manifest()
    changed = dict(recorded, package=dict(recorded["package"], **{"shapetrace/attention/mutants.py": "0" * 64}))
    monkeypatch.setitem(digests._loaded, str(digests.MANIFEST), changed)
    assert _refusal(lessons) == f"refusing to check: shapetrace/attention/mutants.py changed {MESSAGE}"
    with pytest.raises(TamperedError, match="shapetrace/attention/mutants.py changed"):
        digests.verified_text(digests.PACKAGE_DIR / "attention" / "mutants.py")


def test_what_runs_is_what_was_checked(lessons):
    """The parent compiles the solution from the bytes it hashed, not from a second read of the file."""
    ex = load(lessons).exercise("split-heads")
    assert ex.solution_function().__code__.co_filename == str(ex.solution)
    ex.solution.write_text("def split_heads(x, heads):\n    return x\n")
    with pytest.raises(TamperedError, match="split-heads/solution.py changed"):
        ex.solution_function()


def test_the_cli_refuses_in_one_line_with_exit_1(lessons, cli, monkeypatch, tmp_path):
    monkeypatch.setenv("SHAPETRACE_LESSONS", str(lessons))
    learner = tmp_path / "mine.py"
    learner.write_text("def split_heads(x, heads):\n    return x\n")
    judge_like = _split(lessons) / "solution.py"
    judge_like.write_text(judge_like.read_text().replace("transpose", "transpose ", 1))
    r = cli("exercise", "check", "split-heads", "--file", str(learner), "--state-dir", str(tmp_path / "state"))
    assert r.exit_code == 1, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "refusing to check: 01_split_heads/split-heads/solution.py changed" in lines[0], \
        r.output


def test_grading_stops_at_a_refusal(lessons):
    from shapetrace.exercises.grade import grade

    sub = lessons.parent / "class"
    for student in ("ana", "bo", "cid"):
        (sub / student).mkdir(parents=True)
        (sub / student / "split_heads.py").write_text("def split_heads(x, heads):\n    return x\n")
    (_split(lessons) / "solution.py").write_text("def split_heads(x, heads):\n    return x\n")
    done = []
    with pytest.raises(TamperedError, match="split-heads/solution.py changed"):
        grade(sub, lessons, time_limit=2, memory_mb=512, workers=1, on_done=lambda *a: done.append(a))
    assert done == []  # no cell was reported: a tampered checker grades nobody


def test_the_committed_manifest_is_current():
    """Fails whenever a package file or a lesson file changed and the digests were not recorded again."""
    stale = digests.stale(digests.PACKAGE_DIR.parent / "lessons")
    assert stale == [], ("shapetrace/exercises/DIGESTS.json is stale: run `python -m shapetrace.exercises.digests "
                         "--write` and commit it; stale: " + ", ".join(stale[:10]))


def test_the_manifest_ships_as_package_data():
    import tomllib
    from conftest import ROOT

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["package-data"]["shapetrace.exercises"] == ["DIGESTS.json"]
    assert digests.MANIFEST == digests.PACKAGE_DIR / "exercises" / "DIGESTS.json" and digests.MANIFEST.is_file()


def test_the_manifest_is_read_once_per_process(lessons, monkeypatch, tmp_path):
    """A manifest changed after the first check of a session changes nothing in that session."""
    copy = tmp_path / "DIGESTS.json"
    copy.write_text(digests.MANIFEST.read_text())
    monkeypatch.setattr(digests, "MANIFEST", copy)
    monkeypatch.delitem(digests._loaded, str(copy), raising=False)
    digests.verify(lessons)
    solution = _split(lessons) / "solution.py"
    solution.write_text("def split_heads(x, heads):\n    return x\n")
    copy.write_text(digests.manifest_text(lessons))  # a forged record of the changed solution
    with pytest.raises(TamperedError, match="split-heads/solution.py changed"):
        digests.verify(lessons)


def test_a_missing_manifest_refuses_every_check(lessons, monkeypatch, tmp_path):
    monkeypatch.setattr(digests, "MANIFEST", tmp_path / "DIGESTS.json")
    assert _refusal(lessons) == ("refusing to check: the digests file shapetrace/exercises/DIGESTS.json is missing; "
                                 "record the digests with `python -m shapetrace.exercises.digests --write`")


def test_a_learner_who_edits_a_lesson_records_the_digests_again(lessons, cli, monkeypatch, tmp_path, capsys):
    """Editing a solution in a checkout: the check refuses in one line naming the file and the command; after
    the command (here writing a copy of the manifest), the edited lesson is checked."""
    manifest = tmp_path / "DIGESTS.json"
    manifest.write_text(digests.MANIFEST.read_text())
    monkeypatch.setattr(digests, "MANIFEST", manifest)
    monkeypatch.delitem(digests._loaded, str(manifest), raising=False)
    monkeypatch.setenv("SHAPETRACE_LESSONS", str(lessons))
    solution = _split(lessons) / "solution.py"
    solution.write_text(solution.read_text() + "\n# my note on the transpose\n")
    learner = tmp_path / "mine.py"
    learner.write_text(solution.read_text())
    args = ("exercise", "check", "split-heads", "--file", str(learner), "--state-dir", str(tmp_path / "state"))
    r = cli(*args)
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 1 and len(lines) == 1, r.output
    assert f"refusing to check: 01_split_heads/split-heads/solution.py changed {MESSAGE}" in lines[0], r.output
    assert digests.main(["--check"]) == 1
    assert "lessons: 01_split_heads/split-heads/solution.py" in capsys.readouterr().out
    assert digests.main(["--write"]) == 0  # $SHAPETRACE_LESSONS: the folder the learner edits
    assert digests.main(["--check"]) == 0
    assert digests.stale(lessons, manifest) == []
    r = cli(*args)
    assert r.exit_code == 0 and "pass" in r.output.lower(), r.output


def test_a_file_is_keyed_by_its_real_path_through_links(lessons, tmp_path):
    """verified_text keys a file by its real path (os.path.realpath, not pathlib: every module the child
    imports is read through it, once a check): a lesson reached through a link, or a lessons folder named by a
    link, verifies as the real file does; a link that leads out of both folders is no recorded file."""
    rel = _split(lessons).relative_to(lessons) / "solution.py"
    link = tmp_path / "linked-lessons"
    link.symlink_to(lessons)
    text = (lessons / rel).read_text()
    assert digests.verified_text(link / rel, lessons) == text
    assert digests.verified_text(lessons / rel, link) == text
    assert digests.verified_text(Path(digests.__file__)) == Path(digests.__file__).read_text()
    outside = tmp_path / "solution.py"
    outside.symlink_to(tmp_path / "elsewhere.py")
    (tmp_path / "elsewhere.py").write_text(text)
    with pytest.raises(TamperedError, match=f"refusing to check: {tmp_path / 'elsewhere.py'} is not a recorded"):
        digests.verified_text(outside, lessons)


def test_the_files_digested_are_the_ones_rglob_finds(tmp_path):
    """digests._files walks a folder with os.walk (a tenth of rglob's time, before every check) and must
    list what ``rglob`` lists: a linked file, a hidden file, nothing in __pycache__, a linked folder not
    entered, no folder named like a file, no dangling link."""
    root = tmp_path / "tree"
    (root / "sub" / "__pycache__").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    for rel in ("a.py", "sub/b.py", "sub/.hidden.py", "sub/__pycache__/c.py", "sub/d.txt", "elsewhere/e.py",
                "x.toml", "sub/B.PY"):
        (root / rel).write_text("x = 1\n")
    (root / "sub" / "linked.py").symlink_to(root / "elsewhere" / "e.py")
    (root / "sub" / "dangling.py").symlink_to(root / "gone.py")
    (root / "linked-folder").symlink_to(root / "elsewhere", target_is_directory=True)
    (root / "folder.py").mkdir()
    for patterns in (("*.py",), ("*.py", "*.toml")):
        rglob = {str(p) for pattern in patterns for p in root.rglob(pattern)
                 if "__pycache__" not in p.parts and p.is_file()}
        assert set(digests._files(root, patterns)) == rglob
    assert {Path(f).relative_to(root).as_posix() for f in digests._files(root, ("*.py",))} == {
        "a.py", "sub/b.py", "sub/.hidden.py", "sub/linked.py", "elsewhere/e.py"}



def test_a_kept_listing_still_sees_every_file_added_removed_or_renamed(tmp_path, monkeypatch):
    """Each check walks the package and the lessons; a folder's listing is kept while its times stay the
    same (digests._listing; here kept at once: the 2 s "racily clean" margin set aside). A file added,
    removed or renamed after the listing was kept is seen at the next walk, and so is one added by a writer
    who then sets the folder's mtime back (the kernel still moves its ctime)."""
    import os

    monkeypatch.setattr(digests, "RACY_NS", -(10 ** 18))
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.py").write_text("a = 1\n")

    def found() -> list[str]:
        return sorted(Path(f).relative_to(root).as_posix() for f in digests._files(root, ("*.py",)))

    assert found() == ["sub/a.py"]
    assert str(root / "sub") in digests._listed   # kept
    (root / "sub" / "b.py").write_text("b = 1\n")
    assert found() == ["sub/a.py", "sub/b.py"]
    before = os.stat(root / "sub")
    (root / "sub" / "c.py").write_text("c = 1\n")
    os.utime(root / "sub", ns=(before.st_atime_ns, before.st_mtime_ns))   # the mtime put back by hand
    assert os.stat(root / "sub").st_mtime_ns == before.st_mtime_ns
    assert found() == ["sub/a.py", "sub/b.py", "sub/c.py"]
    (root / "sub" / "a.py").rename(root / "sub" / "renamed.py")
    (root / "sub" / "b.py").unlink()
    assert found() == ["sub/c.py", "sub/renamed.py"]
    (root / "sub" / "new").mkdir()
    (root / "sub" / "new" / "d.py").write_text("d = 1\n")
    (root / "sub" / "linked.py").symlink_to(root / "sub" / "c.py")
    assert found() == ["sub/c.py", "sub/linked.py", "sub/new/d.py", "sub/renamed.py"]
    (root / "sub" / "c.py").unlink()   # and the link left dangling is no file
    assert found() == ["sub/new/d.py", "sub/renamed.py"]
