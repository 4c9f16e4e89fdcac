"""The `jarvis` command line."""
