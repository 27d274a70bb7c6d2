"""`python -m tlview`: the same as the `tlview` command."""

from tlview.cli import run

run()
