"""Where logs come from: a file, a .gz, a directory of one log per process, stdin, a URL."""
