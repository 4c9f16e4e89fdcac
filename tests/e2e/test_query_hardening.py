"""The query side under bad input and damaged stores (issue 17): inputs capped before any
work with short errors (a 10 MB MCP query refused at once, the `jarvis serve` process's
memory unchanged), long paths refused without showing the vault's location, a corrupt or
locked published version passed over for the previous one (and named by `jarvis status`),
and CLI errors in one line unless `--debug`."""

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import duckdb
import pytest
from click.testing import CliRunner
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from jarvis_cli.main import cli
from jarvis_core.stores import serving
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_server import build_server
from jarvis_query.reading import NoteAccessError
from jarvis_query.snapshot import open_snapshot
from jarvis_query.validation import QueryError
from tests.pipeline_helpers import PROJECT_ROOT, copy_data
from tests.query_helpers import documents_copy

pytestmark = pytest.mark.slow

JARVIS = str(Path(sys.executable).with_name("jarvis"))
TEN_MB = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def two_versions(published_documents, tmp_path_factory):
    """A small knowledge base published twice (a copy of ``published_documents``, then after
    a note changed), so the serving folder keeps a previous version to fall back to."""
    with pytest.MonkeyPatch.context() as env:
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            env.delenv(name, raising=False)
        config = documents_copy(published_documents, tmp_path_factory.mktemp("hardening"))
        (config.sources["notes"].path / "Sleep.md").write_text("# Sleep\n\nNine hours now.\n")
        assert run_refresh(config)["reasons"] == {"notes": "notes 1 changed"}
    newest, previous = serving.published_names(config.data_dir)
    assert serving.current_name(config.data_dir) == newest
    return config, newest, previous


@pytest.fixture
def damaged_copy(two_versions, tmp_path):
    """A configuration over a private copy of the published versions, free to damage (their
    exported encoders linked, as ``copy_data`` links them: no test damages one)."""
    config, newest, previous = two_versions
    copy_data(config.data_dir / "serving", tmp_path / "data" / "serving")
    return config.model_copy(update={"data_dir": tmp_path / "data"}), newest, previous


def jarvis(config, *args: str, debug: bool = False):
    return CliRunner().invoke(cli, [*(["--debug"] if debug else []), "--config",
                                    str(config.config_path), *args],
                              env={"JARVIS_HOME": str(config.data_dir)}, catch_exceptions=True)


# --- inputs capped before any work ------------------------------------------------------

def test_oversized_arguments_are_refused_with_a_prefix_at_most(two_versions):
    config, _, _ = two_versions
    kb = KnowledgeBase(config)
    try:
        huge = "dedupe " * 1_500_000  # 10.5 MB
        started = time.perf_counter()
        for call in (lambda: kb.search_semantic(huge), lambda: kb.search_hybrid(huge),
                     lambda: kb.search_vault(huge, search_content=True),
                     lambda: kb.search_graphrag(huge)):
            with pytest.raises(QueryError, match=r"^query is too long: 10,500,000 characters "
                                                 r"\(at most 4,000\)$"):
                call()
        print(f"\nfour 10.5 MB queries refused in {time.perf_counter() - started:.4f} s")
        with pytest.raises(QueryError, match="source_types is too long: 21 items"):
            kb.search_hybrid("dedupe", source_types=["note"] * 21)
        with pytest.raises(QueryError, match="each of tags must be at most 128 characters"):
            kb.search_hybrid("dedupe", tags=["x" * 129])
        with pytest.raises(QueryError) as unknown:
            kb.search_vault("dedupe", vault="v" * 100_000)
        assert len(str(unknown.value)) < 150
        with pytest.raises(NoteAccessError, match="longer than 1,024 characters"):
            kb.read_note("a" * TEN_MB)
        refused = jarvis(config, "search", "x" * 5000)
        assert refused.exit_code == 1
        assert refused.output == "Error: QUERY is too long: 5,000 characters (at most 4,000)\n"
    finally:
        kb.close()


def test_a_long_path_never_shows_where_the_vault_is(two_versions):
    config, _, _ = two_versions
    vault = str(config.sources["notes"].path)
    kb = KnowledgeBase(config)
    try:
        for path in ("n" * 300 + ".md",  # a name longer than a file name can be
                     "n" * 254,  # fits, but not once ".md" is added (ENAMETOOLONG)
                     "deep/" * 200 + "x.md"):
            with pytest.raises(QueryError) as refused:  # refused, or naming no document
                kb.read_note(path)
            assert vault not in str(refused.value) and "Errno" not in str(refused.value)
            assert len(str(refused.value)) < 200, path
    finally:
        kb.close()


def _children(name: str) -> list[int]:
    """Processes of this test whose command line holds ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and name in command:
            found.append(int(entry.name))
    return found


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def test_a_10_mb_mcp_query_is_refused_at_once_and_leaves_the_server_as_it_was(two_versions,
                                                                             tmp_path):
    config, _, _ = two_versions

    async def converse():
        params = StdioServerParameters(command=JARVIS, args=["--config",
                                                             str(config.config_path), "serve"],
                                       cwd=str(PROJECT_ROOT), env={"HF_HUB_OFFLINE": "1"})
        with (tmp_path / "server.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    warm = await session.call_tool("search-semantic", {"query": "sleep"})
                    [pid] = _children("serve")
                    before = _rss_kib(pid)
                    started = time.perf_counter()
                    refused = await session.call_tool("search-semantic",
                                                      {"query": "x" * TEN_MB})
                    seconds = time.perf_counter() - started
                    path = await session.call_tool("read-note", {"path": "y" * TEN_MB})
                    after = _rss_kib(pid)
                    still = await session.call_tool("search-vault", {"query": "sleep"})
        return warm, refused, path, still, before, after, seconds

    warm, refused, path, still, before, after, seconds = anyio.run(converse)
    print(f"\n10 MB query refused in {seconds * 1000:.0f} ms (round trip); server RSS "
          f"{before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after")
    assert not warm.is_error and not still.is_error
    assert refused.is_error and refused.content[0].text == (
        "Error: query is too long: 10,485,760 characters (at most 4,000)")
    assert path.is_error and len(path.content[0].text) < 100
    assert "yyyy" not in path.content[0].text
    assert after - before < 64 * 1024  # before the caps: 5.7 GB and minutes of CPU
    logged = (tmp_path / "server.log").read_text()
    assert "x" * 200 not in logged and "y" * 200 not in logged


# --- a corrupt or locked published version ----------------------------------------------

def test_a_truncated_version_is_passed_over_for_the_previous_one(damaged_copy, caplog):
    config, newest, previous = damaged_copy
    tables = config.data_dir / "serving" / newest / serving.SERVING_TABLES_FILE
    with tables.open("r+b") as file:
        file.truncate(tables.stat().st_size // 2)
    kb = KnowledgeBase(config)
    try:
        with caplog.at_level(logging.WARNING, logger="jarvis.query"):
            hits = kb.search_vault("Sleep")
        assert hits and kb.snapshots.current().version.name == previous
        assert f"serving version {newest} is corrupt" in caplog.text
        assert f"answering from version {previous}" in caplog.text
        assert kb.read_note("Sleep")["content"].endswith("Nine hours now.\n")  # from disk

        async def every_tool():
            async with Client(build_server(kb)) as client:
                return [await client.call_tool(tool, arguments) for tool, arguments in (
                    ("search-semantic", {"query": "sleep"}), ("search-vault", {"query": "x"}),
                    ("search-hybrid", {"query": "sleep"}), ("search-graphrag", {"query": "x"}),
                    ("search-graph", {"query_note_path": "Sleep"}),
                    ("read-note", {"path": "Sleep"}), ("list-vaults", {}),
                    ("get-vault-context", {"vault": "notes"}))]

        assert not any(result.is_error for result in anyio.run(every_tool))
    finally:
        kb.close()
    status = jarvis(config, "status")
    assert status.exit_code == 0, status.output
    assert f"serving version {newest} is corrupt (" in status.output
    assert f"showing version {previous}" in status.output
    as_json = json.loads(jarvis(config, "status", "--json").stdout)
    assert as_json["published"]["version"] == previous
    assert as_json["published"]["unreadable"][0]["state"] == "corrupt"


def test_a_version_without_its_manifest_is_passed_over(damaged_copy):
    config, newest, previous = damaged_copy
    (config.data_dir / "serving" / newest / serving.MANIFEST_FILE).unlink()
    kb = KnowledgeBase(config)
    try:
        assert kb.search_vault("Sleep") and kb.snapshots.current().version.name == previous
        assert kb.list_vaults()["published"]["unreadable"] == [{
            "version": newest, "state": "corrupt",
            "reason": f"serving version {newest} has no readable manifest.json "
                      "(FileNotFoundError)"}]
    finally:
        kb.close()


def _table_past_a_cut(config, name: str) -> str:
    """Damage ``name``'s tables file where it still opens (its chunks readable) but one of its
    tables is not: one block of DuckDB's file zeroed (its checksum then fails), tried from the
    end, as the layout of tables in the file is DuckDB's choice; that table's name."""
    tables = config.data_dir / "serving" / name / serving.SERVING_TABLES_FILE
    version = serving.read_version(config.data_dir, name)
    intact = tables.read_bytes()
    block = 256 * 1024
    for start in range(len(intact) - block, block, -block):
        tables.write_bytes(intact[:start] + bytes(block) + intact[start + block:])
        try:
            snapshot = open_snapshot(config, version)
        except duckdb.Error:
            continue  # the chunks' block: refused when opened (the tests above)
        try:
            for (table,) in snapshot.cursor().execute(
                    "SELECT table_name FROM duckdb_tables()").fetchall():
                try:
                    snapshot.cursor().execute(f"SELECT * FROM {table}").fetchall()
                except duckdb.Error:
                    return table
        finally:
            snapshot.close()
    pytest.fail("no damaged block left the chunks readable and another table not")


def test_damage_found_while_answering_moves_to_the_previous_version(damaged_copy, caplog):
    """Damage that spares the chunks passes the opening check; the request that reaches the
    damaged table is answered again from the previous version."""
    config, newest, previous = damaged_copy
    table = _table_past_a_cut(config, newest)
    kb = KnowledgeBase(config)
    try:
        assert kb.snapshots.current().version.name == newest
        with caplog.at_level(logging.WARNING, logger="jarvis.query"):
            answered_by = kb._read(lambda snapshot: (
                snapshot.cursor().execute(f"SELECT * FROM {table}").fetchall(),
                snapshot.version.name)[1])
        assert answered_by == previous == kb.snapshots.current().version.name
        assert f"serving version {newest} failed while it was read" in caplog.text
    finally:
        kb.close()


def test_status_tells_a_locked_version_from_a_corrupt_one(damaged_copy):
    config, newest, previous = damaged_copy
    tables = config.data_dir / "serving" / newest / serving.SERVING_TABLES_FILE
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time, duckdb
        connection = duckdb.connect({str(tables)!r})
        print("held", flush=True)
        sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        status = jarvis(config, "status")
        assert status.exit_code == 0, status.output
        assert f"serving version {newest} is locked (" in status.output
        assert f"showing version {previous}" in status.output
    finally:
        holder.communicate("", timeout=30)


def test_no_readable_version_is_one_clear_error(damaged_copy):
    config, newest, previous = damaged_copy
    for name in (newest, previous):
        (config.data_dir / "serving" / name / serving.SERVING_TABLES_FILE).write_bytes(b"junk")
    status = jarvis(config, "status")
    assert status.exit_code == 1 and "Traceback" not in status.output
    assert status.output.startswith(f"Error: serving version {newest} is corrupt (")
    assert "no earlier version can be read: run `jarvis refresh`" in status.output
    kb = KnowledgeBase(config)
    try:
        async def call():
            async with Client(build_server(kb)) as client:
                return (await client.call_tool("search-vault", {"query": "x"}),
                        await client.call_tool("list-vaults", {}))

        search, listed = anyio.run(call)
        assert search.is_error and search.meta["error_type"] == "corrupt"
        assert not listed.is_error  # the configuration still lists the sources
    finally:
        kb.close()


# --- CLI errors -------------------------------------------------------------------------

def test_unexpected_errors_are_one_line_unless_debug(damaged_copy):
    """A keyword index whose files are gone is no argument error: one line naming the error
    type, or with --debug the traceback."""
    config, newest, _ = damaged_copy
    shutil.rmtree(config.data_dir / "serving" / newest / serving.KEYWORD_DIR)
    (config.data_dir / "serving" / newest / serving.KEYWORD_DIR).mkdir()
    plain = jarvis(config, "keyword", "sleep")
    assert plain.exit_code == 1 and len(plain.output.splitlines()) == 1
    assert plain.output.startswith("Error: ") and "`jarvis --debug …` shows" in plain.output
    as_json = jarvis(config, "keyword", "sleep", "--json")
    assert as_json.exit_code == 1 and "error" in json.loads(as_json.stdout)
    debug = jarvis(config, "keyword", "sleep", debug=True)
    assert debug.exit_code == 1 and debug.exception is not None
    assert not isinstance(debug.exception, SystemExit)
