"""tlview's version: one place that every writer of a file reads, and the build too."""

__version__ = "0.1.0"
