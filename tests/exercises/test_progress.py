"""Progress survives corruption and kills; start never overwrites; the list commands stay torch-free."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, cli_in_process

from shapetrace.exercises.content import load
from shapetrace.exercises.progress import Progress, atomic_write, file_hash, learner_file, start_file

CURRICULUM = load()


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_roundtrip_and_hash_of_passed_file(state, tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("x = 1\n")
    p = Progress.load()
    assert p.status("split-heads", f) == "started"
    p.record_check("split-heads", "wrong-values", f)
    p.record_check("split-heads", "pass", f)
    p.save()
    again = Progress.load()
    assert again.warnings == []
    assert again.status("split-heads", f) == "passed"
    assert again.data["exercises"]["split-heads"]["attempts"] == 2
    assert again.data["exercises"]["split-heads"]["passed_hash"] == file_hash(f)
    f.write_text("x = 2\n")
    assert again.status("split-heads", f) == "edited"
    assert again.ever_passed("split-heads")


def test_corrupt_file_is_set_aside_with_a_warning(state):
    state.mkdir(parents=True)
    (state / "progress.json").write_text('{"exercises": {"split-heads": ')
    p = Progress.load()
    assert len(p.warnings) == 1
    assert "could not be read" in p.warnings[0] and "moved it to" in p.warnings[0]
    aside = [x for x in state.iterdir() if x.name.startswith("progress.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == '{"exercises": {"split-heads": '
    assert p.data["exercises"] == {}
    p.save()
    assert Progress.load().warnings == []


def test_wrong_structure_is_also_set_aside(state):
    state.mkdir(parents=True)
    (state / "progress.json").write_text('[1, 2, 3]')
    p = Progress.load()
    assert p.warnings and p.data["exercises"] == {}


def test_cli_warns_on_corrupt_progress_and_keeps_going(state, cli):
    state.mkdir(parents=True)
    (state / "progress.json").write_bytes(b"\x00\xff garbage")
    r = cli("exercise", "list", "--json")
    assert r.exit_code == 0
    assert json.loads(r.stdout)[0]["id"] == "split-heads"


def test_progress_survives_a_killed_writer(state):
    code = (
        "import sys\n"
        "from shapetrace.exercises.progress import Progress\n"
        "p = Progress.load()\n"
        "i = 0\n"
        "while True:\n"
        "    p.data['exercises'][f'ex{i}'] = {'attempts': i, 'pad': 'x' * 5000}\n"
        "    p.save()\n"
        "    if i == 3:\n"
        "        print('ready', flush=True)\n"
        "    i += 1\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(state))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    proc.kill()
    proc.wait()
    p = Progress.load()
    assert p.warnings == []
    assert len(p.data["exercises"]) >= 4


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "a" / "f.json"
    atomic_write(target, "{}")
    atomic_write(target, '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert sorted(x.name for x in target.parent.iterdir()) == ["f.json"]


def test_start_never_overwrites_without_force(state, tmp_path, cli):
    ws = tmp_path / "ws"
    r = cli("exercise", "start", "split-heads", "--workspace", str(ws))
    assert r.exit_code == 0
    mine = learner_file(ws, "split-heads")
    assert mine.read_text() == CURRICULUM.exercise("split-heads").starter.read_text()
    mine.write_text("# my work\n")
    r = cli("exercise", "start", "split-heads", "--workspace", str(ws))
    assert r.exit_code == 2
    assert mine.read_text() == "# my work\n"
    r = cli("exercise", "start", "split-heads", "--workspace", str(ws), "--force")
    assert r.exit_code == 0
    assert mine.read_text() != "# my work\n"


def test_default_workspace_is_cwd_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = start_file(CURRICULUM.exercise("merge-heads").starter, None, "merge-heads")
    assert path == tmp_path / "shapetrace-exercises" / "merge_heads.py"


def test_reset_one_and_all(state, tmp_path, cli):
    f = tmp_path / "f.py"
    f.write_text("x")
    p = Progress.load()
    for ex in ("split-heads", "merge-heads"):
        p.record_check(ex, "pass", f)
    p.save()
    assert cli("exercise", "reset", "split-heads").exit_code == 0
    assert set(Progress.load().data["exercises"]) == {"merge-heads"}
    assert cli("exercise", "reset", "--all").exit_code == 0
    assert Progress.load().data["exercises"] == {}
    assert cli("exercise", "reset").exit_code == 2


def test_hints_advance_and_stop_at_the_last(state, cli):
    ex = CURRICULUM.exercise("split-heads")
    outs = [cli("exercise", "hint", "split-heads", "--width", "80").stdout for _ in range(len(ex.hints) + 1)]
    assert "hint 1/3" in outs[0] and "hint 2/3" in outs[1] and "hint 3/3" in outs[2] and "hint 3/3" in outs[3]
    assert "view never moves data" in outs[1]


def test_solution_requires_a_pass_or_give_up(state, cli):
    r = cli("exercise", "solution", "split-heads")
    assert r.exit_code == 2
    r = cli("exercise", "solution", "split-heads", "--give-up")
    assert r.exit_code == 0
    assert r.stdout == CURRICULUM.exercise("split-heads").solution.read_text()


def test_lessons_json_and_exercise_list(state, cli):
    data = json.loads(cli("lessons", "--json").stdout)
    assert [d["lesson"] for d in data] == list(range(1, len(CURRICULUM.lessons) + 1))
    assert data[0]["exercises"][0] == {"id": "split-heads", "title": "Split the features into heads",
                                       "lesson": 1, "kind": "function", "status": ""}
    rows = json.loads(cli("exercise", "list", "--json").stdout)
    assert [r["id"] for r in rows] == [e.id for e in CURRICULUM.exercises]
    assert {r["id"] for r in rows if r["kind"] == "test"} == {e.id for e in CURRICULUM.exercises if e.kind == "test"}
    text = cli("lessons", "--width", "80").stdout
    assert "1  Splitting D into heads  0/3" in text
    listed = cli("exercise", "list", "--width", "120").stdout
    assert any("test-round-trip" in line and "write a test" in line for line in listed.splitlines()), listed
    assert not any("split-heads " in line and "write a test" in line for line in listed.splitlines()), listed


def test_unknown_ids_are_one_line_errors(state, cli):
    r = cli("exercise", "hint", "split-head")
    assert r.exit_code == 2
    r = cli("lesson", "99")
    assert r.exit_code == 2


LIST_COMMANDS = [["lessons", "--json"], ["exercise", "list"], ["--help"], ["exercise", "--help"], ["lessons"],
                 ["exercise", "hint", "merge-heads"]]


@pytest.fixture(scope="module")
def torch_after_each_list_command(tmp_path_factory):
    """One fresh interpreter runs every command of :data:`LIST_COMMANDS` in turn and says after each whether
    torch is in ``sys.modules`` (one interpreter instead of six: ``sys.modules`` only grows, so every answer
    "no" proves that no command up to it imported torch, and the first "yes" names the command that did)."""
    code = ("import json, sys\nfrom shapetrace.cli.app import app\n"
            f"for args in {LIST_COMMANDS!r}:\n"
            "    try:\n        app(args)\n    except SystemExit:\n        pass\n"
            "    print('\\ntorch after:', json.dumps([args, 'torch' in sys.modules]))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(tmp_path_factory.mktemp("state")))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    answers = [json.loads(line.split(":", 1)[1]) for line in r.stdout.splitlines() if line.startswith("torch after:")]
    return {tuple(args): imported for args, imported in answers}, r.stdout + r.stderr


@pytest.mark.parametrize("args", LIST_COMMANDS)
def test_list_commands_do_not_import_torch(args, torch_after_each_list_command):
    answers, output = torch_after_each_list_command
    assert answers.get(tuple(args)) is False, output


def test_exercise_engine_modules_do_not_import_rich(torch_zygote):
    """In a zygote's child: a process with torch imported and nothing else (torch loads no rich), where
    these modules' own imports are the only ones that could bring rich in."""
    modules = ["content", "progress", "checker", "answers", "judge", "inputs", "calls",
               "explain_check", "quiz", "live"]
    code = ("import sys\nassert not any(m.startswith('shapetrace') or m.split('.')[0] == 'rich' for m in sys.modules)\n"
            + "".join(f"import shapetrace.exercises.{m}\n" for m in modules)
            + "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.')))\n")
    r = torch_zygote.run(code, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


# -- concurrency and corruption ---------------------------------------------------------------------------

def _parallel(cmds: list[list[str]], env: dict) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for c in cmds]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=120), *p.communicate()) for p in procs]


def test_sixteen_parallel_hints_are_all_counted(state):
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(state))
    hint = [sys.executable, "-m", "shapetrace", "exercise", "hint"]
    ids = [e.id for e in CURRICULUM.exercises]
    done = _parallel([hint + [ids[i % 8]] for i in range(16)], env)
    assert all(r.returncode == 0 for r in done), [r.stderr for r in done]
    p = Progress.load()
    assert p.warnings == []
    assert sum(p.data["exercises"][i]["hints"] for i in ids[:8]) == 16


def test_sixteen_parallel_check_records_are_all_counted(state, tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("x = 1\n")
    code = ("import sys\nfrom shapetrace.exercises.progress import Progress\n"
            "from pathlib import Path\nwith Progress.update() as p:\n"
            "    p.record_check('split-heads', sys.argv[1], Path(sys.argv[2]))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SHAPETRACE_STATE_DIR=str(state))
    verdicts = ["wrong-values"] * 15 + ["pass"]
    done = _parallel([[sys.executable, "-c", code, v, str(f)] for v in verdicts], env)
    assert all(r.returncode == 0 for r in done), [r.stderr for r in done]
    e = Progress.load().data["exercises"]["split-heads"]
    assert e["attempts"] == 16 and e["ever_passed"] is True


@pytest.mark.parametrize("entry, key", [({"ever_passed": "no"}, "ever_passed"), ({"attempts": "3"}, "attempts"),
                                        ({"hints": -1}, "hints"), ({"passed_hash": 7}, "passed_hash")])
def test_a_bad_field_is_reset_with_a_warning_and_the_rest_kept(state, entry, key):
    state.mkdir(parents=True)
    good = {"attempts": 2, "last_verdict": "crash"}
    (state / "progress.json").write_text(json.dumps({"exercises": {"split-heads": entry, "merge-heads": good}}))
    p = Progress.load()
    assert p.warnings == [f"progress of split-heads in {state / 'progress.json'}: {key} = {entry[key]!r} "
                          "is not valid; reset it"]
    assert key not in p.data["exercises"]["split-heads"]
    assert p.data["exercises"]["merge-heads"] == good
    assert not p.ever_passed("split-heads")


def test_an_entry_that_is_not_a_record_is_reset(state):
    state.mkdir(parents=True)
    (state / "progress.json").write_text('{"exercises": {"split-heads": [1], "merge-heads": {"attempts": 1}}}')
    p = Progress.load()
    assert p.warnings == [f"progress of split-heads in {state / 'progress.json'} was not a record (list); reset it"]
    assert p.data["exercises"] == {"split-heads": {}, "merge-heads": {"attempts": 1}}


def test_set_aside_copies_are_never_overwritten(state):
    state.mkdir(parents=True)
    for text in ("{broken one", "{broken two", "{broken three"):
        (state / "progress.json").write_text(text)
        Progress.load()
    kept = sorted(x.read_text() for x in state.iterdir() if x.name.startswith("progress.json.corrupt-"))
    assert kept == ["{broken one", "{broken three", "{broken two"]


def test_state_folder_that_is_a_file_warns_and_keeps_going(tmp_path, monkeypatch):
    bad = tmp_path / "state"
    bad.write_text("not a folder")
    monkeypatch.setenv("SHAPETRACE_STATE_DIR", str(bad))
    with Progress.update() as p:
        p.record_check("split-heads", "crash", bad)
    assert len(p.warnings) == 1 and "cannot be used" in p.warnings[0] and "not kept this time" in p.warnings[0]
    assert bad.read_text() == "not a folder"


def test_unwritable_state_folder_warns_and_keeps_going(state, monkeypatch):
    import shapetrace.exercises.progress as progress_mod

    def refuse(path, text):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(progress_mod, "atomic_write", refuse)
    with Progress.update() as p:
        p.record_check("split-heads", "crash", state)
    assert p.warnings == [f"progress could not be saved in {state} (Permission denied); this result is not recorded"]


def test_check_shows_its_verdict_when_the_state_folder_is_unusable(tmp_path):

    bad = tmp_path / "state"
    bad.write_text("not a folder")
    sol = CURRICULUM.exercise("merge-heads").solution
    r = cli_in_process("exercise", "check", "merge-heads", "--file", str(sol), "--width", "80",
                env={"SHAPETRACE_STATE_DIR": str(bad)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("✓ pass  merge-heads")
    assert "warning: progress folder" in r.stderr and "Traceback" not in r.stderr
