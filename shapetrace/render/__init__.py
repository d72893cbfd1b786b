"""The rendering layer: the only place (with the CLI) that imports Rich."""
