"""Benchmarks behind ``jarvis bench``: measured on this machine, returned as JSON-able dicts,
so that defaults (like the embedding backend ``auto`` picks) rest on numbers."""
