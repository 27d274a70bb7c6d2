"""Markdown for a CI job summary or a pull-request comment: `--format markdown`."""
