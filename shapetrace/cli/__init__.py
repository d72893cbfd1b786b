"""The command line (Typer): one module per command group, wired in :mod:`shapetrace.cli.app`."""

from shapetrace.cli.app import app, main

__all__ = ["app", "main"]
