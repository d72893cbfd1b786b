"""``shapetrace run --break list``: the catalogue of classic bugs, as a table or as JSON.

The variant options themselves are fields of :class:`~shapetrace.app.request.RunRequest`, and a variant
runs through ``run``'s one pipeline (:func:`shapetrace.cli.run.show_run`). No torch at import time.
"""

from __future__ import annotations

import json

from shapetrace.attention.catalogue import CATALOGUE
from shapetrace.cli.common import out_console, write_json


def show_catalogue(json_out: bool, width: int | None) -> None:
    """Every classic bug of the catalogue: JSON with ``--json``, else a table."""
    if json_out:
        write_json(json.dumps([b.to_dict() for b in CATALOGUE.values()], indent=2))
        return
    from shapetrace.render.variants import print_catalogue

    print_catalogue(out_console(width))
