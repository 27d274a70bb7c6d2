"""`python -m tlview`: the same as the `tlview` command."""

from .cli import run

run()
