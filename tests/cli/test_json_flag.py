"""``--json`` means one thing on every command: a flag that prints JSON on standard output.

(It once took a file name on ``exercise grade`` alone; that command writes a file with ``--json-file``.)
"""

from __future__ import annotations

import typer

from shapetrace.cli.app import app


def _commands(command, path=()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_json_option_is_a_flag_and_none_takes_a_file_name():
    found = []
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if "--json" in getattr(param, "opts", []):
                found.append(" ".join(path))
                assert param.is_flag, f"{' '.join(path)}: --json takes a value"
    assert {"run", "trace", "exercise check", "exercise grade", "exercise list"} <= set(found), found
