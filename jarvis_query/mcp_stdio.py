"""`python -m jarvis_query.mcp_stdio` (what `jarvis serve` runs): the MCP server over
stdio, as a profile of the configuration sees the sources."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from jarvis_core.config import ConfigError, load_config
from jarvis_core.profiles import UnknownProfile, resolve_profile
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.server_log import configure_logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jarvis_query.mcp_stdio",
                                     description="Jarvis's MCP server over stdio.")
    parser.add_argument("--config", help="Configuration file (default: $JARVIS_CONFIG, "
                                         "else ./jarvis.yaml).")
    parser.add_argument("--log-file", type=Path, help="Also log to this file.")
    parser.add_argument("--profile", help="Serve as this profile of the configuration sees "
                                          "the sources (default: every source).")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging(args.log_file)
    try:
        config = load_config(args.config)
        resolve_profile(config, args.profile)
    except (ConfigError, UnknownProfile) as exc:
        parser.exit(2, f"jarvis serve: {exc}\n")
    kb = KnowledgeBase(config)
    kb.load_in_background()
    # The MCP SDK (about a second to import) is imported while the published version and its
    # query encoder load on the background thread.
    from jarvis_query.mcp_assistant import serve_stdio

    serve_stdio(kb, args.profile)


if __name__ == "__main__":
    main()
