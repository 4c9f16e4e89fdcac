"""The main job on real vaults: wiring, incrementality, deletions, bad files, checks."""

import os
import shutil

import dagster as dg
import pytest

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_assets.sources import raw_asset
from jarvis_core import progress
from jarvis_core.sources import registry
from jarvis_core.stores.connections import read_only
from jarvis_core.text.documents import chunk_config_id, chunk_source
from jarvis_core.text.tokens import token_counter
from jarvis_resources import build_resources
from tests.pipeline_helpers import (
    SAMPLE_VAULT,
    checks,
    metadata,
    private_copy,
    rows,
    run,
    write_config,
)

VAULT = registry.kind("vault")
raw_notes = raw_asset(VAULT, VAULT.asset)


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The sample's first run, once for the module: the tests of that run read it, and the
    tests of a run after it (a second run, an edit, broken chunks, a purge) start from a
    ``private_copy`` of its project instead of running the sample again."""
    root = tmp_path_factory.mktemp("first-run")
    shutil.copytree(SAMPLE_VAULT, root / "vault", symlinks=True)
    config = write_config(root / "project", {"sample": root / "vault"})
    with dg.DagsterInstance.ephemeral() as instance:
        result = run(config, "sample", instance)
    return config, result


@pytest.fixture
def after_first_run(first_run, tmp_path):
    """A private copy of the project as the sample's first run left it, free to edit and
    run again."""
    return private_copy(first_run[0], tmp_path)


def test_sample_vault_materializes_with_every_check_passing(first_run):
    sample_config, result = first_run
    assert result.success
    evaluations = checks(result)
    # a vault's runs hold the vault's raw checks only (no other kind's failed-item ratio)
    assert set(evaluations) == {"failed_file_ratio", "every_document_has_chunks",
                                "chunks_within_token_limit", "chunk_ids_unique",
                                "vectors_match_chunks", "vector_dimension_matches_model",
                                "no_orphan_vectors", "no_dangling_edges",
                                "every_edge_has_evidence", "broken_link_ratio",
                                "code_edges_have_both_ends",
                                "keyword_index_matches_chunks",
                                "snapshot_matches_graph", "snapshot_figures_consistent",
                                "source_reachable"}
    raw_assets = {e.asset_key.to_user_string() for e in evaluations.values()
                  if e.check_name in ("source_reachable", "failed_file_ratio")}
    assert raw_assets == {"raw_notes"}
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized & {kind.asset.name for kind in registry.kinds()} == {"raw_notes"}
    failing = {name: e.metadata for name, e in evaluations.items() if not e.passed}
    assert not failing, f"asset checks failed on the sample vault: {failing}"

    notes_on_disk = sum(1 for p in SAMPLE_VAULT.rglob("*.md") if ".obsidian" not in p.parts)
    raw = metadata(result, "raw_notes")
    assert raw["new"] + raw["failed"] == notes_on_disk
    assert raw["dagster/row_count"] == raw["new"] >= 30
    assert raw["attachments"] >= 1
    text = metadata(result, "chunks")
    assert text["new"] == raw["new"] and text["dagster/row_count"] > raw["new"]

    limit = token_counter("all-MiniLM-L6-v2").max_tokens
    [(largest, empty_bodies_chunked)] = rows(sample_config, """
        SELECT max(token_count),
               count(*) FILTER (WHERE trim(n.body) = '')
        FROM chunks c JOIN notes n USING (source, path)""")
    assert largest <= limit and empty_bodies_chunked == 0


def test_second_run_reparses_and_rechunks_nothing(first_run, after_first_run, instance):
    first, sample_config = first_run[1], after_first_run
    ids_before = rows(sample_config, "SELECT chunk_id FROM chunks ORDER BY chunk_id")
    second = run(sample_config, "sample", instance)
    raw, text = metadata(second, "raw_notes"), metadata(second, "chunks")
    assert (raw["new"], raw["changed"], raw["deleted"]) == (0, 0, 0)
    assert raw["unchanged"] == metadata(first, "raw_notes")["new"]
    assert (text["new"], text["changed"], text["deleted"], text["chunks_added"]) == (0, 0, 0, 0)
    assert rows(sample_config, "SELECT chunk_id FROM chunks ORDER BY chunk_id") == ids_before


def test_edit_delete_and_rename_reach_every_table(after_first_run, instance):
    sample_config = after_first_run
    sample_vault = sample_config.sources["sample"].path
    notes = sorted(p for p in sample_vault.rglob("*.md") if p.stat().st_size > 400)
    edited, deleted, renamed = notes[0], notes[1], notes[2]
    rel = lambda p: p.relative_to(sample_vault).as_posix()  # noqa: E731
    untouched_ids = set(rows(sample_config,
                             "SELECT chunk_id FROM chunks WHERE path NOT IN (?, ?, ?)",
                             [rel(edited), rel(deleted), rel(renamed)]))

    edited.write_text(edited.read_text() + "\n\n## Added later\n\nA brand new paragraph about "
                      "barometric pressure drift.\n")
    deleted_rel, renamed_rel = rel(deleted), rel(renamed)
    deleted.unlink()
    renamed.rename(renamed.with_name("Renamed note.md"))
    new_rel = rel(renamed.with_name("Renamed note.md"))

    result = run(sample_config, "sample", instance)
    raw, text = metadata(result, "raw_notes"), metadata(result, "chunks")
    assert (raw["new"], raw["changed"], raw["deleted"], raw["renamed"]) == (1, 1, 2, 1)
    assert (text["new"], text["changed"], text["deleted"]) == (1, 1, 2)
    for table in ("notes", "chunks"):
        paths = {p for (p,) in rows(sample_config, f"SELECT DISTINCT path FROM {table}")}
        assert deleted_rel not in paths and renamed_rel not in paths and new_rel in paths
    assert rows(sample_config, "SELECT count(*) FROM chunks WHERE text LIKE '%barometric "
                               "pressure drift%'") == [(1,)]
    assert untouched_ids <= set(rows(sample_config, "SELECT chunk_id FROM chunks"))


def test_bad_files_are_reported_and_the_rest_is_ingested(tmp_path, instance):
    vault = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    (vault / "latin1.md").write_bytes("Crème brûlée notes. ".encode("latin-1") * 20)
    (vault / "picture.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    (vault / "empty.md").write_bytes(b"")
    (vault / "only-frontmatter.md").write_text("---\ntags: [x]\n---\n")
    with (vault / "huge.md").open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    os.symlink("loop.md", vault / "loop.md")
    (vault / "locked.md").write_text("secret")
    (vault / "locked.md").chmod(0)
    config = write_config(tmp_path / "project", {"v": vault},
                          ingest={"max_failed_ratio": 0.01})

    result = run(config, "v", instance)
    assert result.success
    reasons = dict(rows(config, "SELECT path, reason FROM ingest_failures"))
    assert reasons["picture.md"].startswith("binary content")
    assert reasons["huge.md"].startswith("file is 50.0 MB")
    assert reasons["loop.md"].startswith("symlink loop")
    if os.geteuid() != 0:
        assert reasons["locked.md"].startswith("cannot read file")
    ingested = dict(rows(config, "SELECT path, warnings FROM notes"))
    assert "invalid UTF-8" in ingested["latin1.md"][0]
    assert "empty.md" in ingested and "only-frontmatter.md" in ingested
    assert rows(config, "SELECT count(*) FROM chunks WHERE path IN "
                        "('empty.md', 'only-frontmatter.md')") == [(0,)]
    ratio_check = checks(result)["failed_file_ratio"]
    assert not ratio_check.passed and ratio_check.severity == dg.AssetCheckSeverity.WARN
    others = {name: e.passed for name, e in checks(result).items() if name != "failed_file_ratio"}
    assert {"every_document_has_chunks", "no_dangling_edges", "vectors_match_chunks"} <= set(others)
    assert all(others.values()), others

    second = run(config, "v", instance)
    assert metadata(second, "raw_notes")["failed"] == len(reasons)
    assert metadata(second, "raw_notes")["changed"] == 0


def test_blocking_checks_fail_on_broken_chunks(first_run, after_first_run, instance):
    first, sample_config = first_run[1], after_first_run
    chunked = rows(sample_config, "SELECT count(*) FROM chunks")[0][0]
    assert checks(first)["chunks_within_token_limit"].metadata["chunks_checked"].value == chunked
    paths = [p for (p,) in rows(sample_config, "SELECT DISTINCT path FROM chunks ORDER BY 1")]
    with store_connection(sample_config) as conn:
        conn.execute("DELETE FROM chunks WHERE path = ?", [paths[0]])
        conn.execute("INSERT INTO chunks SELECT * FROM chunks WHERE path = ? LIMIT 1", [paths[1]])
        # a chunk the chunker wrote too long (its document not recounted yet) ...
        conn.execute("UPDATE chunks SET text = repeat('overflow ', 400) WHERE path = ?",
                     [paths[2]])
        conn.execute("UPDATE chunked_documents SET tokens_checked = false WHERE path = ?",
                     [paths[2]])
        # ... and one stored over the limit in a document recounted before
        conn.execute("UPDATE chunks SET token_count = 9999 WHERE path = ?", [paths[3]])
    result = run(sample_config, "sample", instance, raise_on_error=False)  # nothing changed
    assert not result.success
    evaluations = checks(result)
    for name in ("chunk_ids_unique", "chunks_within_token_limit", "every_document_has_chunks"):
        assert not evaluations[name].passed, name
        assert evaluations[name].blocking, name
    tokens = {key: value.value for key, value
              in evaluations["chunks_within_token_limit"].metadata.items()}
    recounted = rows(sample_config, "SELECT count(*) FROM chunks WHERE path = ?", [paths[2]])
    # only the document not recounted since it was chunked is recounted
    assert tokens["chunks_checked"] == recounted[0][0] and tokens["documents_checked"] == 1
    assert tokens["chunks_over_limit"] >= 1 and tokens["stored_counts_over_limit"] >= 1


def test_unconfigured_source_is_purged(tmp_path, after_first_run, instance):
    """A second vault is added beside the sample already run, run, then dropped."""
    sample_vault = after_first_run.sources["sample"].path
    other = tmp_path / "other"
    other.mkdir()
    (other / "one.md").write_text("# One\n\nA lone note.")
    both = write_config(tmp_path / "project", {"sample": sample_vault, "other": other})
    run(both, "other", instance)
    only_sample = write_config(tmp_path / "project", {"sample": sample_vault})
    result = run(only_sample, "other", instance)
    assert metadata(result, "raw_notes")["deleted"] == 1
    for table in ("notes", "chunks", "chunked_documents", "attachments"):
        assert rows(only_sample, f"SELECT count(*) FROM {table} WHERE source = 'other'") == [(0,)]
    assert rows(only_sample, "SELECT count(*) FROM notes WHERE source = 'sample'")[0][0] > 30


def test_raw_notes_called_directly(sample_config, instance):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    instance.add_dynamic_partitions(kind_partitions(VAULT).name, ["sample"])
    resources = build_resources(str(sample_config.config_path))
    context = dg.build_asset_context(partition_key="sample", instance=instance)
    result = raw_notes(context, jarvis=resources["jarvis"], tables=resources["tables"])
    assert result.metadata["new"] >= 30 and result.metadata["deleted"] == 0


def store_connection(config):
    return build_resources(str(config.config_path))["tables"].get_connection()


def test_store_schema_matches_declared_tables(published_sample):
    with read_only(published_sample.duckdb_path) as conn:
        for table in registry.declared_tables():
            columns = [c for (c,) in conn.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                "ORDER BY column_index", [table.name]).fetchall()]
            assert columns == list(table.schema), table.name


def test_chunking_in_small_batches_stores_what_one_batch_stores(sample_copy):
    """Documents are chunked a batch at a time (texts and chunk rows of one batch in
    memory): in batches of 4 the source gets exactly the chunks one batch gives it."""
    sample_config = sample_copy
    whole = rows(sample_config, "SELECT chunk_id, doc_key, position, text, token_count "
                                "FROM chunks ORDER BY chunk_id")
    documents = rows(sample_config, "SELECT count(*) FROM chunked_documents")[0][0]
    with store_connection(sample_config) as conn:
        conn.execute("DELETE FROM chunks")
        conn.execute("DELETE FROM chunked_documents")
    tables = build_resources(str(sample_config.config_path))["tables"]
    connections, reported = [], []

    def connect():
        connections.append(1)
        return tables.get_connection()

    progress.add_listener(reported.append)
    try:
        counter = token_counter("all-MiniLM-L6-v2")
        config_id = chunk_config_id("all-MiniLM-L6-v2", counter.max_tokens,
                                    sample_config.chunking.overlap_tokens)
        chunked = chunk_source(connect, "sample", sample_config.kind_of("sample"), counter,
                               sample_config.chunking.overlap_tokens, config_id, 4)
    finally:
        progress.remove_listener(reported.append)
    assert chunked.counts["new"] == documents and chunked.total == len(whole)
    assert rows(sample_config, "SELECT chunk_id, doc_key, position, text, token_count "
                               "FROM chunks ORDER BY chunk_id") == whole
    batches = -(-documents // 4)
    assert len(connections) == 2 + 2 * batches  # stale and totals, then a read and a write each
    done = [event.done for event in reported if event.layer == "chunks"]
    assert done == sorted(done) and done[-1] == documents
