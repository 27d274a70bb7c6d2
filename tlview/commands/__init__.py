"""The command line's helpers: its error funnel and exit, paths, and the inputs listing."""
