"""Graph extraction on the sample vault, checked against sample_data/VAULT_FEATURES.md,
and link resolution on small synthetic vaults."""

import ast
import random
from pathlib import Path

import duckdb
import numpy as np
import pytest

from jarvis_core.graph.similarity import similarity_edges
from jarvis_core.settings import GraphSettings
from jarvis_core.sources import registry
from jarvis_core.sources.vault.graph import EXTRACTOR as VAULT_EXTRACTOR
from jarvis_core.sources.vault.graph import extract_vault_graph
from jarvis_core.sources.vault.links import LinkResolver, canonical_url
from jarvis_core.stores import tables
from jarvis_core.stores.graph.elements import EXPLICIT, INFERRED
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keys import file_key, note_key
from jarvis_core.text.tokens import token_counter
from tests.graph_helpers import graph_rows, synced, write_rows
from tests.pipeline_helpers import PROJECT_ROOT, SAMPLE_VAULT
from tests.source_helpers import VAULT, Extracted

FEATURES = (PROJECT_ROOT / "sample_data" / "VAULT_FEATURES.md").read_text()
BODY_EXTRACTORS = {"wikilink", "embed", "markdown_link", "url"}


def key(path: str) -> str:
    return note_key(VAULT, path)


@pytest.fixture(scope="module")
def counter():
    return token_counter("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def sample(counter) -> Extracted:
    return Extracted(SAMPLE_VAULT, counter)


def appendix(letter: str) -> list[list[str]]:
    """Rows of an appendix's TSV block, header dropped."""
    block = FEATURES.split(f"## Appendix {letter}")[1].split("```tsv\n")[1].split("```")[0]
    return [line.split("\t") for line in block.splitlines()[1:]]


def written_target(raw: str) -> str:
    """'[[Ingest API#Rate Limiting\\|x]]' -> 'Ingest API'."""
    return raw.lstrip("!")[2:-2].split("|")[0].rstrip("\\").split("#")[0].strip()


def node_for(path: str) -> str:
    return key(path) if path.endswith(".md") else file_key(VAULT, path)


def shared(resolves_to: str) -> list[str]:
    """'AMBIGUOUS: a | b' -> [a, b]: the note Obsidian opens first, then the others."""
    return resolves_to.removeprefix("AMBIGUOUS: ").split(" | ")


# --- the sample vault against VAULT_FEATURES.md ---------------------------------------


def test_broken_links_are_the_five_documented_and_retro_resolves_as_obsidian_does(sample):
    unresolved = {(b.origin, b.line, b.target) for b in sample.graph.broken
                  if b.reason == "unresolved"}
    assert unresolved == {
        (key("Projects/Lumen/Architecture/Architecture Overview.md"), 52, "Kafka Migration Plan"),
        (key("Projects/Lumen/Architecture/Architecture Overview.md"), 134, "Grafana Setup"),
        (key("Inbox/Ideas for Lumen v2.md"), 28, "Kafka Migration Plan"),
        (key("Areas/How-To/Calibrate a Station Sensor.md"), 44, "Sensor Drift Study"),
        (key("Daily/2026-11-04.md"), 28, "Heatmap Prototype"),
    }
    assert {b.reason for b in sample.graph.broken} == {"unresolved"}
    # [[Retro]], a name two notes share, leads where Obsidian leads (the shorter path, the
    # meeting note meant); the other Retro stays on an inferred edge
    checklist = key("Areas/Engineering/Code Review Checklist.md")
    retros = {(e.dst, e.confidence) for e in sample.edges(origin=checklist, extractor="wikilink")
              if e.dst.endswith("/Retro.md")}
    assert retros == {(key("Meetings/2026/Retro.md"), EXPLICIT),
                      (key("Projects/Lumen/Retro.md"), INFERRED)}
    assert key("Projects/Lumen/Retro.md") not in {
        m.node_key for m in sample.graph.mentions if m.origin == checklist}
    assert all(b.evidence and "[[" + b.target in sample.chunk_text[b.evidence[0]]
               for b in sample.graph.broken)
    assert sum(row[4] == "BROKEN" for row in appendix("C")) == len(unresolved)
    nodes = {node.key for node in sample.graph.nodes}
    assert not {target for _, _, target in unresolved} & {n.title for n in sample.graph.nodes}
    assert all(e.src in nodes and e.dst in nodes for e in sample.graph.edges)


def test_every_body_wikilink_and_embed_resolves_as_appendix_c_says(sample):
    expected = set()
    inferred = set()
    for source, _line, kind, _raw, resolves_to in appendix("C"):
        if resolves_to == "BROKEN" or resolves_to == source:
            continue  # a self-link ([[Alerting]] in Alerting.md) is no edge
        relation = "EMBEDS" if kind == "embed" else "LINKS_TO"
        first, *others = shared(resolves_to)
        expected.add((key(source), relation, node_for(first)))
        inferred |= {(key(source), relation, node_for(other)) for other in others}
    for confidence, wanted in ((EXPLICIT, expected), (INFERRED, inferred)):
        assert sample.triples(extractor="wikilink", confidence=confidence) | sample.triples(
            extractor="embed", confidence=confidence) == wanted
    files = {n.key: n for n in sample.graph.nodes if n.type == "file"}
    assert set(files) == {file_key(VAULT, "Attachments/station-diagram.png"),
                          file_key(VAULT, "Attachments/sensor-calibration.csv")}


@pytest.mark.parametrize("origin, written, target", [
    ("Projects/Lumen/Architecture/Ingest API.md", "[[DDIA]]",
     "Reading/Books/Designing Data-Intensive Applications.md"),
    ("Projects/Lumen/Onboarding.md", "[[Timescale]]", "Projects/Lumen/Architecture/TimescaleDB.md"),
    ("Projects/Lumen/Onboarding.md", "[[Dan]]", "People/Daniel Okafor.md"),
    ("People/Sam Novak.md", "[[Backlog Runbook]]",
     "Projects/Lumen/Runbooks/Ingest Backlog Runbook.md"),
    ("Projects/Lumen/Onboarding.md", "[[ingest api]]", "Projects/Lumen/Architecture/Ingest API.md"),
    ("Projects/Lumen/Onboarding.md", "[[Projects/Lumen/Architecture/Ingest API]]",
     "Projects/Lumen/Architecture/Ingest API.md"),
    ("Projects/Lumen/Lumen.md", "[[Projects/Lumen/Retro]]", "Projects/Lumen/Retro.md"),
    ("Projects/Lumen/Retro.md", "[[Meetings/2026/Retro]]", "Meetings/2026/Retro.md"),
    ("Projects/Lumen/Decisions/ADR-002 Idempotent Ingest.md", "[[Ingest API#^idempotency-rule]]",
     "Projects/Lumen/Architecture/Ingest API.md"),
    ("Projects/Lumen/Roadmap.md", "[[Ingest API#Rate Limiting\\|rate limiter]]",
     "Projects/Lumen/Architecture/Ingest API.md"),
    ("Daily/2026-11-13.md", "[[Café Notes]]", "Personal/Café Notes.md"),
    ("Projects/Lumen/Onboarding.md", "![[Architecture Overview#Data Flow]]",
     "Projects/Lumen/Architecture/Architecture Overview.md"),
    ("Areas/How-To/Calibrate a Station Sensor.md", "[[sensor-calibration.csv]]",
     "Attachments/sensor-calibration.csv"),
])
def test_link_forms_resolve_with_chunks_that_hold_them(sample, origin, written, target):
    [edge] = [e for e in sample.edges(origin=key(origin))
              if e.dst == node_for(target) and e.extractor in ("wikilink", "embed")]
    assert any(written in sample.chunk_text[chunk_id] for chunk_id in edge.evidence)


def test_relative_markdown_links_resolve_from_the_folder_then_the_root(sample):
    assert sample.triples(extractor="markdown_link") == {
        (key("Areas/How-To/Set Up Local Dev.md"), "LINKS_TO",
         key("Projects/Lumen/Architecture/Ingest API.md")),
        (key("Projects/Lumen/Decisions/ADR-001 Use TimescaleDB.md"), "LINKS_TO",
         key("Projects/Lumen/Architecture/Query Service.md")),
    }
    for edge in sample.edges(extractor="markdown_link"):
        assert "%20" in edge.evidence_text
        assert edge.evidence and all("%20" in sample.chunk_text[c] for c in edge.evidence)


def test_urls_become_canonical_link_nodes(sample):
    links = {n.key for n in sample.graph.nodes if n.type == "link"}
    assert {"link:https://duckdb.org", "link:https://docs.timescale.com",
            "link:https://www.postgresql.org/docs/16/sql-createindex.html",
            "link:https://guzey.com/books/why-we-sleep/"} <= links
    assert not any("#" in link for link in links)
    assert {(e.src, e.dst) for e in sample.edges(relation="REFERENCES")} >= {
        (key(path), "link:https://duckdb.org") for path in (
            "Projects/Lumen/Decisions/ADR-001 Use TimescaleDB.md", "Inbox/Quick Capture.md",
            "Inbox/Ideas for Lumen v2.md")}


def documented_tags() -> dict[str, set[str]]:
    """note -> tags, from appendix A (frontmatter) and appendix B (body)."""
    tags: dict[str, set[str]] = {}
    for note, field, value in appendix("A"):
        if field == "tags":
            parsed = ast.literal_eval(value)
            items = parsed.split(",") if isinstance(parsed, str) else parsed
            tags.setdefault(note, set()).update(item.strip().lower() for item in items)
    for note, inline in appendix("B"):
        if inline != "-":
            tags.setdefault(note, set()).update(t.strip().lstrip("#") for t in inline.split(","))
    return tags


def test_tags_and_nested_tag_chains(sample):
    expected = {(key(note), "TAGGED", f"tag:{tag}")
                for note, tags in documented_tags().items() for tag in tags}
    assert sample.triples(relation="TAGGED") == expected
    child_of = sample.edges(relation="CHILD_OF")
    sleep_notes = {key(p) for p in ("Areas/Health/Sleep.md", "Reading/Books/Why We Sleep.md",
                                    "Daily/2026-10-21.md")}
    assert {e.origin for e in child_of
            if (e.src, e.dst) == ("tag:area/health/sleep", "tag:area/health")} == sleep_notes
    assert {e.origin for e in child_of if (e.src, e.dst) == ("tag:area/health", "tag:area")} \
        == sleep_notes | {key("Areas/Health/Running Log.md")}
    assert {(e.src, e.dst) for e in child_of} == {
        ("tag:area/health/sleep", "tag:area/health"), ("tag:area/health", "tag:area"),
        ("tag:project/lumen", "tag:project")}
    tag_nodes = {n.title for n in sample.graph.nodes if n.type == "tag"}
    assert {"area", "area/health", "project"} <= tag_nodes
    assert not tag_nodes & {"not-a-tag", "nope", "123", "7", "15", "sql-createindex-concurrently"}


def test_frontmatter_tags_point_at_the_tags_field(sample):
    [edge] = [e for e in sample.edges(relation="TAGGED")
              if (e.src, e.dst) == (key("Projects/Lumen/Architecture/Ingest API.md"), "tag:api")]
    assert edge.evidence == () and edge.evidence_text == 'tags: ["lumen", "ingest", "api"]'


def test_typed_relations_are_the_eight_documented_and_none_from_code(sample):
    path = {name: key(p) for name, p in {
        "Ingest API": "Projects/Lumen/Architecture/Ingest API.md",
        "TimescaleDB": "Projects/Lumen/Architecture/TimescaleDB.md",
        "Alerting": "Projects/Lumen/Architecture/Alerting.md",
        "Query Service": "Projects/Lumen/Architecture/Query Service.md",
        "Dashboard": "Projects/Lumen/Architecture/Dashboard.md",
        "Maya Chen": "People/Maya Chen.md",
        "Station Firmware Protocol": "Projects/Lumen/Architecture/Station Firmware Protocol.md",
    }.items()}
    assert sample.triples(extractor="typed_relation") == {
        (path["Ingest API"], "DEPENDS_ON", path["TimescaleDB"]),
        (path["Alerting"], "USES", path["Ingest API"]),
        (path["Query Service"], "READS_FROM", path["TimescaleDB"]),
        (path["Alerting"], "OWNED_BY", path["Maya Chen"]),
        (path["Alerting"], "READS_FROM", path["TimescaleDB"]),
        (path["Dashboard"], "READS_FROM", path["Query Service"]),
        (path["Ingest API"], "OWNED_BY", path["Maya Chen"]),
        (path["Ingest API"], "SPECIFIED_BY", path["Station Firmware Protocol"]),
    }
    assert len(sample.edges(extractor="typed_relation")) == 10  # one per (note, occurrence)
    [inline] = [e for e in sample.edges(relation="OWNED_BY") if e.src == path["Alerting"]]
    assert inline.evidence_text == "this|OWNED_BY|[[Maya Chen]]"
    assert inline.evidence and all("OWNED_BY" in sample.chunk_text[c] for c in inline.evidence)


def test_text_inside_code_produces_nothing(sample):
    conventions = key("Areas/Knowledge/Vault Conventions.md")
    assert sample.triples(origin=conventions, extractor="wikilink") == {
        (conventions, "LINKS_TO", key(path)) for path in (
            "Reading/Papers/Dense Passage Retrieval.md",
            "Reading/Papers/BM25 and Probabilistic Relevance.md",
            "Templates/Daily Note Template.md",
            "Projects/Lumen/Architecture/Architecture Overview.md",  # line 58, outside code
            "Projects/Lumen/Architecture/Alerting.md")}
    assert not sample.edges(origin=conventions, extractor="typed_relation")
    assert not sample.edges(origin=conventions, extractor="embed")
    said = {b.target for b in sample.graph.broken} | {n.title for n in sample.graph.nodes}
    assert not said & {"not a link", "also not a link", "not-an-embed", "A", "B", "Note A",
                       "Note B", "not-a-tag", "nope"}


def test_frontmatter_relation_fields(sample):
    values = {(note, field): ast.literal_eval(value) for note, field, value in appendix("A")}
    for field in ("up", "parent", "related"):
        documented = sum(len(set(v if isinstance(v, list) else [v]))
                         for (_, f), v in values.items() if f == field)
        assert len(sample.edges(relation=field.upper(), extractor="frontmatter")) == documented
    other_links = sum(len(set(v if isinstance(v, list) else [v])) for (_, f), v in values.items()
                      if f in ("owner", "attendees", "deciders"))
    assert len(sample.edges(relation="LINKS_TO", extractor="frontmatter")) == other_links
    ingest_api = key("Projects/Lumen/Architecture/Ingest API.md")
    [up] = sample.edges(relation="UP", origin=ingest_api)
    assert (up.dst, up.evidence, up.evidence_text) == (key("Projects/Lumen/Lumen.md"), (),
                                                       'up: "[[Lumen]]"')
    assert sample.triples(relation="PARENT", origin=ingest_api) == {
        (ingest_api, "PARENT", key("Projects/Lumen/Architecture/Architecture Overview.md"))}
    dynamo = key("Reading/Papers/Dynamo.md")
    assert sample.triples(relation="RELATED", origin=dynamo) == {
        (dynamo, "RELATED", key("Reading/Books/Designing Data-Intensive Applications.md"))}
    prep = key("Inbox/Vendor Call Prep.md")
    assert sample.triples(origin=prep, extractor="frontmatter") == {
        (prep, "RELATED", key("People/Sam Novak.md")),
        (prep, "RELATED", key("Projects/Lumen/Architecture/TimescaleDB.md"))}


def test_every_edge_has_evidence_and_body_chunks_hold_the_text(sample):
    written: dict[tuple[str, str], set[str]] = {}
    for source, _line, _kind, raw, resolves_to in appendix("C"):
        for target in shared(resolves_to):
            written.setdefault((key(source), node_for(target)), set()).add(
                "[[" + written_target(raw))
    tag_lines = {(row["note_key"], entry["tag"]): entry["lines"]
                 for row in sample.notes for entry in row["tag_lines"]}
    body_start = {row["note_key"]: row["body_start_line"] for row in sample.notes}
    for edge in sample.graph.edges:
        assert edge.evidence_text.strip() and len(edge.evidence_text) <= 300
        texts = [sample.chunk_text[chunk_id] for chunk_id in edge.evidence]
        if edge.extractor in BODY_EXTRACTORS:
            assert texts, edge
        if edge.extractor in ("wikilink", "embed"):
            assert all(any(w in text for w in written[edge.origin, edge.dst]) for text in texts)
        elif edge.extractor == "url":
            assert all(edge.dst.removeprefix("link:") in text for text in texts)
        elif edge.relation == "TAGGED":
            tag = edge.dst.removeprefix("tag:")
            in_body = max(tag_lines[edge.origin, tag]) >= body_start[edge.origin]
            assert bool(texts) == in_body
            assert all(f"#{tag}" in text.lower() for text in texts)
    assert len(sample.graph.edges) == len({e.key for e in sample.graph.edges})


def test_mentions_are_the_chunks_of_the_body_edges(sample):
    from_edges = {(chunk_id, e.dst, e.origin) for e in sample.edges(confidence=EXPLICIT)
                  if e.relation in ("LINKS_TO", "EMBEDS", "REFERENCES", "TAGGED")
                  for chunk_id in e.evidence}
    assert {(m.chunk_id, m.node_key, m.origin) for m in sample.graph.mentions} == from_edges
    onboarding = key("Projects/Lumen/Onboarding.md")
    [line_19] = [c for c in sample.chunks if c["path"] == "Projects/Lumen/Onboarding.md"
                 and "[[ingest api]]" in sample.chunk_text[c["chunk_id"]]]
    assert {m.node_key for m in sample.graph.mentions
            if m.chunk_id == line_19["chunk_id"]} >= {
        key("Projects/Lumen/Architecture/Ingest API.md"),
        key("Projects/Lumen/Architecture/TimescaleDB.md")}
    assert all(m.origin == onboarding for m in sample.graph.mentions
               if m.chunk_id == line_19["chunk_id"])


def test_output_and_fingerprints_do_not_depend_on_row_order(sample):
    notes, chunks = list(sample.notes), list(sample.chunks)
    random.Random(7).shuffle(notes)
    random.Random(7).shuffle(chunks)
    again = extract_vault_graph(VAULT, notes, chunks, attachments=sample.attachments)
    assert again.edges == sample.graph.edges and again.broken == sample.graph.broken
    assert again.mentions == sample.graph.mentions
    assert [(n, n.properties) for n in again.nodes] == [(n, n.properties)
                                                        for n in sample.graph.nodes]
    assert again.fingerprints == sample.graph.fingerprints
    assert set(again.fingerprints) == {row["note_key"] for row in sample.notes}


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def test_editing_a_note_changes_only_its_fingerprint(sample, sample_vault, counter):
    note = sample_vault / "Reading/Books/Why We Sleep.md"
    note.write_text(note.read_text() + "\nCompare with [[Dynamo]] for no reason at all.\n")
    edited = Extracted(sample_vault, counter)
    origin = key("Reading/Books/Why We Sleep.md")
    assert changed(sample.graph.fingerprints, edited.graph.fingerprints) == {origin}
    assert (origin, "LINKS_TO", key("Reading/Papers/Dynamo.md")) in edited.triples()


def test_renaming_notes_changes_how_links_to_them_resolve(sample, sample_vault, counter):
    old_dynamo, new_dynamo = "Reading/Papers/Dynamo.md", "Reading/Papers/Amazon Dynamo.md"
    old_retro, new_retro = "Meetings/2026/Retro.md", "Meetings/2026/Sprint Retro.md"
    for old, new in ((old_dynamo, new_dynamo), (old_retro, new_retro)):
        (sample_vault / old).rename(sample_vault / new)
    renamed = Extracted(sample_vault, counter)

    linking = {e.origin for e in sample.graph.edges if e.dst in (key(old_dynamo), key(old_retro))}
    checklist = key("Areas/Engineering/Code Review Checklist.md")  # its [[Retro]]: one note now
    assert changed(sample.graph.fingerprints, renamed.graph.fingerprints) == linking | {
        key(old_dynamo), key(new_dynamo), key(old_retro), key(new_retro), checklist}
    assert {(b.origin, b.target) for b in renamed.graph.broken if b.target == "Dynamo"} == {
        (e.origin, "Dynamo") for e in sample.edges(extractor="wikilink")
        if e.dst == key(old_dynamo)}
    assert {b.origin for b in renamed.graph.broken if b.target.startswith("Meetings/2026/Retro")} \
        == {e.origin for e in sample.graph.edges if e.dst == key(old_retro)} - {checklist}
    assert {(e.dst, e.confidence) for e in renamed.edges(origin=checklist, extractor="wikilink")
            if e.dst.endswith("Retro.md")} == {(key("Projects/Lumen/Retro.md"), EXPLICIT)}
    assert not {e.dst for e in renamed.graph.edges} & {key(old_dynamo), key(old_retro)}


# --- resolution on small synthetic vaults ---------------------------------------------


@pytest.fixture
def resolver() -> LinkResolver:
    return LinkResolver(
        "v",
        ["Projects/Lumen/Retro.md", "Meetings/2026/Retro.md", "Lumen/Retro.md",
         "Architecture/Ingest API.md", "Personal/Caf\u00e9 Notes.md", "People/Daniel Okafor.md",
         "People/Dan.md", "Books/DDIA Book.md", "Books/Other.md", "Root.md", "Deep/Root.md"],
        {"People/Daniel Okafor.md": ["Dan", "Daniel"], "Books/DDIA Book.md": ["DDIA", "Shared"],
         "Books/Other.md": ["Shared"]},
        ["Attachments/diagram.png", "Attachments/data.csv"],
    )


def keys(*paths: str) -> tuple[str, ...]:
    """Note keys in the order given: the one Obsidian opens first, then the others."""
    return tuple(note_key("v", p) for p in paths)


@pytest.mark.parametrize("target, expected", [
    ("Projects/Lumen/Retro", keys("Projects/Lumen/Retro.md")),           # exact path
    ("projects/lumen/retro.md", keys("Projects/Lumen/Retro.md")),        # exact, any case
    ("Lumen/Retro", keys("Lumen/Retro.md")),                             # exact beats suffix
    ("2026/Retro", keys("Meetings/2026/Retro.md")),                      # path suffix
    ("umen/Retro", ()),                                                  # only whole folders
    ("Retro", keys("Lumen/Retro.md", "Meetings/2026/Retro.md", "Projects/Lumen/Retro.md")),
    ("ingest api", keys("Architecture/Ingest API.md")),                  # file name, any case
    ("Ingest API.md", keys("Architecture/Ingest API.md")),
    ("  Ingest   API ", keys("Architecture/Ingest API.md")),             # whitespace collapsed
    ("Cafe\u0301 Notes", keys("Personal/Caf\u00e9 Notes.md")),           # NFD written, NFC file
    ("Root", keys("Root.md", "Deep/Root.md")),                           # the root file first
    ("Root.md", keys("Root.md")),                                        # a path: the root file
    ("ddia", keys("Books/DDIA Book.md")),                                # alias
    ("Dan", keys("People/Dan.md")),                                      # a file name beats alias
    ("Daniel", keys("People/Daniel Okafor.md")),
    ("Shared", keys("Books/Other.md", "Books/DDIA Book.md")),            # shared alias
    ("Nowhere", ()),
    ("", ()),
])
def test_resolver(resolver, target, expected):
    assert resolver.resolve(target) == expected


# Obsidian 1.13.7's getFirstLinkpathDest on this vault, as observed through its developer
# console (pvliesdonk/markdown-vault-mcp#1350, #1380): the exact vault path, else the linking
# note's own folder (an ancestor's counts for nothing), else the shortest path string
@pytest.mark.parametrize("files, from_note, first", [
    (["Note.md", "zzzz/Note.md", "a/b/Note.md"], "Index.md", "Note.md"),
    (["Note.md", "zzzz/Note.md", "a/b/Note.md"], "zzzz/Source.md", "Note.md"),  # exact path
    (["zzzz/Note.md", "a/b/Note.md"], "Index.md", "a/b/Note.md"),  # shorter, though deeper
    (["zzzz/Note.md", "a/b/Note.md"], "zzzz/Source.md", "zzzz/Note.md"),  # its own folder
    (["zzzz/Note.md", "b/Note.md", "a/b/Note.md"], "zzzz/deep/Source.md", "b/Note.md"),
    (["b/Note.md", "a/Note.md"], "Index.md", "a/Note.md"),  # a tie goes by path
])
def test_a_shared_name_leads_where_obsidian_leads(files, from_note, first):
    resolver = LinkResolver("v", [*files, from_note], {})
    found = resolver.resolve("Note", from_note)
    assert found[0] == note_key("v", first)
    assert sorted(found) == sorted(note_key("v", f) for f in files)


def test_resolver_attachments_and_relative_paths(resolver):
    assert resolver.resolve("diagram.png") == (file_key("v", "Attachments/diagram.png"),)
    assert resolver.resolve("Attachments/DATA.csv") == (file_key("v", "Attachments/data.csv"),)
    assert resolver.resolve("missing.png") == ()
    assert resolver.resolve_relative("../Lumen/Retro.md", "Projects/Notes/x.md") == keys(
        "Projects/Lumen/Retro.md")
    assert resolver.resolve_relative("Lumen/Retro.md", "Meetings/x.md") == keys("Lumen/Retro.md")
    assert resolver.resolve_relative("../diagram.png", "Attachments/Sub/x.md") == (
        file_key("v", "Attachments/diagram.png"),)


def write_vault(root: Path, files: dict[str, str | bytes]) -> Path:
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (root / path).write_bytes(content)
        else:
            (root / path).write_text(content)
    return root


def test_small_vault_links_attachments_and_collapsing(tmp_path, counter):
    root = write_vault(tmp_path, {
        "Hub.md": (
            "---\nmentor: \"[[Other]]\"\nup: \"[[Other]]\"\ntags: [team/a]\n---\n"
            "# Hub\n\n"
            "See [[Other]] and [[other|again]] and [[#Hub]] and [[Hub]].\n\n"
            "Picture ![[pic.png]] and ![[gone.png]] and [[Other#Part]].\n\n"
            "Web: <HTTPS://Example.COM:443/#top> and [x](https://example.com/) and "
            "[mail](mailto:a@b.c) and [out](../outside.txt) and [bad](Missing%20Note.md).\n"
        ),
        "Other.md": "Just text #team/a/b.\n",
        "Long.md": "word " * 100 + "then [[Other]] and more words.\n",
        "pic.png": b"\x89PNG\r\n",
    })
    extracted = Extracted(root, counter, relation_fields=("mentor",))
    hub, other = note_key(VAULT, "Hub.md"), note_key(VAULT, "Other.md")
    [long_line] = extracted.edges(origin=note_key(VAULT, "Long.md"))
    assert "then [[Other]] and" in long_line.evidence_text
    assert len(long_line.evidence_text) == 300
    [links_to] = extracted.edges(relation="LINKS_TO", extractor="wikilink", origin=hub)
    assert links_to.dst == other
    assert links_to.evidence_text == ("See [[Other]] and [[other|again]] and [[#Hub]] and "
                                      "[[Hub]].")
    assert len(links_to.evidence) >= 1
    assert {e.dst for e in extracted.edges(relation="LINKS_TO")} == {other}  # no self-links
    assert extracted.triples(relation="EMBEDS") == {(hub, "EMBEDS", file_key(VAULT, "pic.png"))}
    assert {(b.target, b.reason) for b in extracted.graph.broken} == {
        ("gone.png", "unresolved"), ("Missing%20Note.md", "unresolved")}
    assert extracted.triples(extractor="frontmatter") == {(hub, "MENTOR", other),
                                                          (hub, "LINKS_TO", other)}
    [reference] = extracted.edges(relation="REFERENCES")
    assert reference.dst == "link:https://example.com" and reference.extractor == "url"
    assert extracted.triples(relation="CHILD_OF") == {("tag:team/a/b", "CHILD_OF", "tag:team/a"),
                                                      ("tag:team/a", "CHILD_OF", "tag:team")}
    assert {e.origin for e in extracted.edges(relation="CHILD_OF")
            if e.src == "tag:team/a"} == {hub, other}


@pytest.mark.parametrize("url, canonical", [
    ("HTTPS://Example.COM/", "https://example.com"),
    ("http://example.com:80/a/b/?q=1#frag", "http://example.com/a/b/?q=1"),
    ("https://example.com:8443/Path", "https://example.com:8443/Path"),
    ("https://User@Example.com/x", "https://User@example.com/x"),
    ("ftp://example.com/", None),
    ("mailto:a@b.c", None),
    ("https://[::1/", None),
    ("Notes/Ingest%20API.md", None),
])
def test_canonical_url(url, canonical):
    assert canonical_url(url) == canonical


# --- similarity -------------------------------------------------------------------------


def test_similarity_edges_keep_top_neighbours_above_threshold_once_per_pair():
    vectors = {
        "note:v/a.md": np.array([1.0, 0.0, 0.0]),
        "note:v/b.md": np.array([0.9, 0.1, 0.0]),
        "note:v/c.md": np.array([0.8, 0.3, 0.0]),
        "note:v/d.md": np.array([0.0, 0.0, 2.0]),  # not unit length: still cosine
    }
    edges = similarity_edges("v", vectors, top_k=1, threshold=0.8)
    assert [(e.src, e.dst) for e in edges] == [("note:v/a.md", "note:v/b.md"),
                                               ("note:v/b.md", "note:v/c.md")]
    edge = edges[0]
    assert (edge.relation, edge.confidence, edge.extractor, edge.origin, edge.evidence) == (
        "SIMILAR_TO", "inferred", "similarity", "note:v/a.md", ())
    assert edge.weight == pytest.approx(0.9 / np.hypot(0.9, 0.1), abs=1e-6)
    assert edge.evidence_text == f"cosine {edge.weight:.2f}"
    assert len(similarity_edges("v", vectors, top_k=5, threshold=0.8)) == 3
    assert similarity_edges("v", {"note:v/a.md": np.ones(3)}) == []


OVERVIEW = "Projects/Lumen/Architecture/Architecture Overview.md"  # 17 notes link to it


def test_notes_extracted_a_batch_at_a_time_make_the_graph_one_batch_makes(sample, tmp_path):
    """The sample vault seven notes at a time (links into later batches wait for the end),
    then with a much linked note deleted: what one batch writes, in the tables and the
    store."""
    runs = {}
    for size in (7, 100):
        with duckdb.connect() as conn, SqliteGraphStore(tmp_path / f"{size}.sqlite") as store:
            tables.ensure_schema(conn, registry.declared_tables())
            found = []
            for notes in (sample.notes, [n for n in sample.notes if n["path"] != OVERVIEW]):
                kept = {note["path"]: note["note_key"] for note in notes}
                write_rows(conn, VAULT, {
                    "notes": notes,
                    "attachments": [{"path": path} for path in sample.attachments],
                    "chunks": [{**chunk, "doc_key": kept[chunk["path"]]}
                               for chunk in sample.chunks if chunk["path"] in kept]})
                run = synced(conn, store, VAULT, VAULT_EXTRACTOR, size, GraphSettings())
                assert run.dangling == 0
                found.append(graph_rows(conn, store))
            assert run.removed == {key(OVERVIEW)}
            runs[size] = found
    assert runs[7] == runs[100]
    assert len(runs[7][0]["graph_edges"]) == len(sample.graph.edges)
