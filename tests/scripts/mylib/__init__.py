"""A tiny 'library' the two_parts.py script imports (its ops count, with their file:line)."""
