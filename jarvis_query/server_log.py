"""Where a serving process logs: stderr (and a file when asked), never stdout, which carries
the MCP protocol. Kept apart from the server so that logging is set up before the MCP SDK
is imported and the published version starts loading."""

from __future__ import annotations

import logging
from pathlib import Path


def configure_logging(log_file: Path | None = None, level: str = "INFO") -> None:
    """Log lines to stderr (and ``log_file``): stdout carries the protocol."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(level=level, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
