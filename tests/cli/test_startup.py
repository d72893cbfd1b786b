"""Startup work of a real ``shapetrace`` process: the objects torch leaves are frozen out of the cyclic
garbage collector's reach once torch is imported (shapetrace.cli.common.import_torch), never under a
test runner, and never by a command that does not import torch."""

from __future__ import annotations

import gc
import subprocess
import sys

from conftest import ROOT

PROBE = ("import gc, sys\n"
         "sys.argv = ['shapetrace', *sys.argv[1:]]\n"
         "from shapetrace.cli.app import main\n"
         "try:\n"
         "    main()\n"
         "except SystemExit as exc:\n"
         "    code = exc.code\n"
         "print('frozen', gc.get_freeze_count() > 50_000, 'torch', 'torch' in sys.modules, 'exit', code,\n"
         "      file=sys.stderr)\n")


def probe(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}, timeout=120)
    return proc.stderr.strip().splitlines()[-1]


def test_run_freezes_what_import_torch_left():
    assert probe("run", "--json") == "frozen True torch True exit 0"


def test_help_imports_no_torch_and_freezes_nothing():
    assert probe("--help") == "frozen False torch False exit 0"


def test_a_test_runner_never_freezes(cli):
    before = gc.get_freeze_count()
    assert cli("run", "--json").exit_code == 0
    assert gc.get_freeze_count() == before
