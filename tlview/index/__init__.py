"""Records to compiles: a log's index, one per process that wrote it (log.read_log)."""
