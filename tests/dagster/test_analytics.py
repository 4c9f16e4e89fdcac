"""Vault analytics on the sample vault: every figure checked against values worked out here,
independently, from sample_data/VAULT_FEATURES.md (links, broken links, tags) and from the
files themselves (words, headings, frontmatter, dates) — never from the snapshot code."""

import ast
import base64
import json
import re
import shutil
import statistics
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import dagster as dg
import duckdb
import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from markdown_it import MarkdownIt

from jarvis_assets.analytics import vault_analytics
from jarvis_assets.checks.analytics import vault_analytics_checks
from jarvis_assets.partitions import source_partitions
from jarvis_cli.main import cli
from jarvis_core.analytics.figures import compute_snapshot
from jarvis_core.analytics.history import graph_content_hash, record_snapshot
from jarvis_core.settings import AnalyticsSettings
from jarvis_core.sources import registry
from jarvis_core.stores import tables
from jarvis_resources import build_resources
from tests.pipeline_helpers import PROJECT_ROOT, SAMPLE_VAULT, checks, metadata, run, write_config

FEATURES = (PROJECT_ROOT / "sample_data" / "VAULT_FEATURES.md").read_text(encoding="utf-8")
SETTINGS = AnalyticsSettings()


# --- the expected vault, from the feature map and the files ---------------------------------

def _section(heading: str) -> str:
    start = FEATURES.index(heading)
    end = FEATURES.find("\n## ", start + 1)
    return FEATURES[start:end if end > 0 else None]


def _tsv(heading: str) -> list[dict]:
    block = _section(heading).split("```tsv\n", 1)[1].split("```", 1)[0]
    header, *lines = block.strip("\n").split("\n")
    return [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]


def _split_frontmatter(text: str) -> tuple[str | None, str]:
    """(frontmatter block or None, body) of a note file."""
    lines = text.split("\n")
    if lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() == "---":
                return "\n".join(lines[1:end]), "\n".join(lines[end + 1:])
    return None, text


class Vault:
    """The sample vault's notes and links as the feature map and the files describe them."""

    def __init__(self, root):
        self.root = root
        self.paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")
                            if ".obsidian" not in p.parts)
        self.by_stem = defaultdict(list)
        for path in self.paths:
            self.by_stem[path.rsplit("/", 1)[-1].removesuffix(".md").lower()].append(path)
        self.aliases = {}
        for path, value in re.findall(r"^\| `([^`]+\.md)` \| `([^`]+)`", _section(
                "## 4. Aliases"), re.M):
            parsed = ast.literal_eval(value)
            for alias in [parsed] if isinstance(parsed, str) else parsed:
                self.aliases[alias.lower()] = path
        self.links = self._links()
        self.files = {path: self._file_facts(path) for path in self.paths}

    def resolve(self, target: str) -> str:
        target = target.split("#", 1)[0].split("|", 1)[0].strip()
        if "/" in target:
            return target + ".md"
        [path] = self.by_stem.get(target.lower()) or [self.aliases[target.lower()]]
        return path

    def _links(self) -> set[tuple[str, str]]:
        links = set()
        for row in _tsv("## Appendix C"):                 # wikilinks and embeds in bodies
            target = row["resolves_to"].removeprefix("AMBIGUOUS: ").split(" | ")[0]
            if target.endswith(".md"):                     # a shared name: Obsidian's pick
                links.add((row["source"], target))
        for row in _tsv("## Appendix A"):                 # link-holding frontmatter fields
            if row["field"] not in ("tags", "aliases"):
                links |= {(row["note"], self.resolve(t))
                          for t in re.findall(r"\[\[([^\]]+)\]\]", row["parsed_value"])}
        # section 8: the two relative markdown links to notes
        links |= {("Areas/How-To/Set Up Local Dev.md", "Projects/Lumen/Architecture/Ingest API.md"),
                  ("Projects/Lumen/Decisions/ADR-001 Use TimescaleDB.md",
                   "Projects/Lumen/Architecture/Query Service.md")}
        # section 11: typed relations link their two sides
        for note, parsed in re.findall(r"^\| `([^`]+)` \| \d+ \| `.*` \| (.+) \|$",
                                       _section("## 11. Typed relations"), re.M):
            subject, _, rest = parsed.partition(" —")
            obj = rest.split("→ ", 1)[1].split(" (", 1)[0]
            subject = note if "(this note)" in subject else self.resolve(subject)
            links.add((subject, self.resolve(obj)))
        return {(src, dst) for src, dst in links if src != dst}

    def _file_facts(self, path: str) -> dict:
        file = self.root / path
        block, body = _split_frontmatter(file.read_text(encoding="utf-8"))
        try:
            frontmatter = yaml.safe_load(block) if block is not None else None
        except yaml.YAMLError:
            frontmatter = None
        updated = frontmatter.get("updated") if isinstance(frontmatter, dict) else None
        modified = datetime.combine(updated, datetime.min.time()) if updated else \
            datetime.utcfromtimestamp(file.stat().st_mtime)
        headings = sum(token.type == "heading_open" for token in MarkdownIt().parse(body))
        return {"words": len(re.findall(r"\w+", body)), "headings": headings,
                "frontmatter": isinstance(frontmatter, dict) and bool(frontmatter),
                "modified_at": modified}

    def tags(self) -> dict[str, set[str]]:
        tags = defaultdict(set)
        for row in _tsv("## Appendix A"):
            if row["field"] == "tags":
                value = ast.literal_eval(row["parsed_value"])
                parts = value.split(",") if isinstance(value, str) else value
                tags[row["note"]] |= {part.strip() for part in parts}
        for row in _tsv("## Appendix B"):
            inline = row["inline_tags_in_body (outside code, URLs, headings)"]
            tags[row["note"]] |= {t.strip().lstrip("#") for t in inline.split(",")
                                  if t.strip() != "-"}
        return tags

    def broken(self) -> list[tuple[str, str, str, int]]:
        """(target, reason, source path, line) of every broken body link."""
        found = []
        for row in _tsv("## Appendix C"):
            target = row["raw"].strip("![]").split("|")[0].split("#")[0]
            if row["resolves_to"] == "BROKEN":
                found.append((target, "unresolved", row["source"], int(row["line"])))
        return found


def pagerank(paths: list[str], links: set[tuple[str, str]], damping=0.85) -> dict[str, float]:
    """Power iteration; a note without out-links spreads its rank over every note."""
    index = {p: i for i, p in enumerate(paths)}
    n = len(paths)
    out = defaultdict(list)
    for src, dst in links:
        out[index[src]].append(index[dst])
    rank = np.full(n, 1 / n)
    for _ in range(1000):
        new = np.full(n, (1 - damping) / n)
        for i in range(n):
            if out[i]:
                for j in out[i]:
                    new[j] += damping * rank[i] / len(out[i])
            else:
                new += damping * rank[i] / n
        if np.abs(new - rank).sum() < 1e-12:
            break
        rank = new
    return {p: rank[index[p]] for p in paths}


def modularity(links: set[tuple[str, str]], community: dict[str, int]) -> float:
    """Newman's modularity of the undirected simple graph of ``links``."""
    edges = {tuple(sorted(pair)) for pair in links}
    degree = Counter(node for edge in edges for node in edge)
    m = len(edges)
    inside = sum(community[a] == community[b] for a, b in edges) / m
    by_community = Counter()
    for node, d in degree.items():
        by_community[community[node]] += d
    return inside - sum((total / (2 * m)) ** 2 for total in by_community.values())


def quality(words, links_out, links_in, headings, frontmatter) -> float:
    """The documented formula, written out again (unrounded: the snapshot keeps 0.1)."""
    return (35 * min(words / 300, 1) + 25 * min(links_out / 3, 1)
            + 15 * min(links_in / 3, 1) + 10 * min(headings / 3, 1) + 15 * frontmatter)


# --- one pipeline run shared by the module ---------------------------------------------------

@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analytics")
    vault_root = tmp / "vault"
    shutil.copytree(SAMPLE_VAULT, vault_root, symlinks=True)
    config = write_config(tmp / "project", {"sample": vault_root})
    with dg.DagsterInstance.ephemeral() as instance:
        result = run(config, "sample", instance)
    with duckdb.connect(str(config.duckdb_path), read_only=True) as conn:
        row = conn.execute("SELECT snapshot_id, generated_at, figures FROM analytics_snapshots "
                           "WHERE source = 'sample'").fetchall()
        notes = {r["path"]: r for r in conn.execute(
            "SELECT * FROM analytics_notes WHERE source = 'sample'").pl().to_dicts()}
    [(snapshot_id, generated_at, figures)] = row
    vault = Vault(vault_root)
    expected = _expected(vault, generated_at)
    return {"config": config, "result": result, "figures": json.loads(figures),
            "notes": notes, "generated_at": generated_at, "vault": vault,
            "expected": expected, "snapshot_id": snapshot_id}


def _expected(vault: Vault, now: datetime) -> dict:
    out, into = defaultdict(set), defaultdict(set)
    for src, dst in vault.links:
        out[src].add(dst)
        into[dst].add(src)
    ranks = pagerank(vault.paths, vault.links)
    notes = {}
    for path in vault.paths:
        facts = vault.files[path]
        links_out, links_in = len(out[path]), len(into[path])
        notes[path] = {
            **facts, "links_out": links_out, "links_in": links_in,
            "degree": len(out[path] | into[path]), "pagerank": ranks[path],
            "orphan": not links_out and not links_in, "dead_end": links_in and not links_out,
            "quality": quality(facts["words"], links_out, links_in, facts["headings"],
                               facts["frontmatter"]),
            "stale": facts["modified_at"] < now - timedelta(days=SETTINGS.stale_after_days)
            and links_in >= SETTINGS.stale_min_links_in,
            "folder": path.rsplit("/", 1)[0] if "/" in path else "/",
        }
    return notes


# --- the figures -------------------------------------------------------------------------------

def test_note_and_word_counts(analysed):
    figures, expected = analysed["figures"], analysed["expected"]
    assert figures["totals"]["notes"] == 53 == len(expected)
    for path, note in expected.items():
        row = analysed["notes"][path]
        assert (row["words"], row["headings"], row["frontmatter"]) == \
            (note["words"], note["headings"], note["frontmatter"]), path
    words = [note["words"] for note in expected.values()]
    assert figures["totals"]["words"] == figures["words"]["total"] == sum(words)
    assert figures["words"]["median"] == statistics.median(words)
    assert figures["words"]["empty_notes"] == 2       # Untitled.md, Vendor Call Prep.md
    assert figures["words"]["longest"]["path"] == \
        "Projects/Lumen/Architecture/Architecture Overview.md"


def test_links_orphans_and_dead_ends(analysed):
    figures, expected = analysed["figures"], analysed["expected"]
    assert figures["totals"]["links"] == len(analysed["vault"].links)
    for path, note in expected.items():
        row = analysed["notes"][path]
        assert (row["links_out"], row["links_in"], row["degree"]) == \
            (note["links_out"], note["links_in"], note["degree"]), path
    assert figures["orphans"] == sorted(p for p, n in expected.items() if n["orphan"]) == \
        ["Inbox/Untitled.md"]
    assert figures["dead_ends"] == sorted(p for p, n in expected.items() if n["dead_end"])
    assert figures["totals"]["dead_ends"] == len(figures["dead_ends"]) == 2
    assert figures["degree_distribution"] == {
        str(d): c for d, c in sorted(Counter(n["degree"] for n in expected.values()).items())}


def test_broken_links_with_their_sources(analysed):
    figures = analysed["figures"]
    broken = analysed["vault"].broken()
    assert len(broken) == 5        # section 9: 5 unresolved occurrences ([[Retro]] resolves)
    assert figures["totals"]["broken_links"] == 5
    assert figures["totals"]["broken_targets"] == len({(t, r) for t, r, _, _ in broken}) == 4
    got = {(b["target"], b["reason"], s["path"], s["line"])
           for b in figures["broken_links"] for s in b["sources"]}
    assert got == set(broken)
    assert figures["broken_links"][0]["target"] == "Kafka Migration Plan"
    assert figures["broken_links"][0]["count"] == 2


def test_hubs_by_degree_and_pagerank(analysed):
    expected = analysed["expected"]
    for path, note in expected.items():
        assert analysed["notes"][path]["pagerank"] == pytest.approx(note["pagerank"], abs=1e-6)
    ranked = sorted(expected, key=lambda p: (-expected[p]["degree"], -expected[p]["pagerank"],
                                             p))[:SETTINGS.top_n]
    hubs = analysed["figures"]["hubs"]
    assert [h["path"] for h in hubs] == ranked
    assert hubs[0]["path"] == "Projects/Lumen/Lumen.md"   # the hub note of the feature map
    assert [h["degree"] for h in hubs] == [expected[p]["degree"] for p in ranked]


def test_leiden_communities(analysed):
    figures, expected = analysed["figures"], analysed["expected"]
    rows = analysed["notes"]
    linked = {p for p, n in expected.items() if not n["orphan"]}
    membership = {p: rows[p]["community"] for p in linked}
    assert all(rows[p]["community"] == -1 for p in expected if p not in linked)
    members = defaultdict(set)
    for path, number in membership.items():
        members[number].add(path)
    communities = figures["communities"]
    assert figures["totals"]["communities"] == len(communities) == len(members) >= 3
    assert [c["size"] for c in communities] == sorted(
        (len(m) for m in members.values()), reverse=True)
    assert sum(c["size"] for c in communities) == len(linked) == 52
    assert figures["totals"]["modularity"] == pytest.approx(
        modularity(analysed["vault"].links, membership), abs=1e-5)
    assert figures["totals"]["modularity"] > 0.2
    # the health notes link mostly to one another: Leiden keeps them together
    health = {"Areas/Health/Sleep.md", "Reading/Books/Why We Sleep.md",
              "Reading/Books/Atomic Habits.md", "Areas/Health/Running Log.md"}
    assert len({membership[p] for p in health}) == 1
    tags = analysed["vault"].tags()
    for community in communities:
        group = members[community["id"]]
        ranked = sorted(group, key=lambda p: (-expected[p]["pagerank"], p))
        assert community["top_notes"] == ranked[:3]
        counts = Counter(t for p in group for t in tags.get(p, ()))
        assert [(t["tag"], t["notes"]) for t in community["top_tags"]] == \
            sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:3]


def test_tag_distribution(analysed):
    counts = Counter(tag for tags in analysed["vault"].tags().values() for tag in tags)
    assert {t["tag"]: t["notes"] for t in analysed["figures"]["tags"]} == dict(counts)
    assert analysed["figures"]["totals"]["tags"] == len(counts)
    assert counts["project/lumen"] == 26                # section 5: "in 26 notes"
    assert analysed["figures"]["tags"][0] == {"tag": "project/lumen", "notes": 26}


def test_stale_notes(analysed):
    expected = analysed["expected"]
    stale = sorted((p for p, n in expected.items() if n["stale"]),
                   key=lambda p: (-expected[p]["links_in"], p))
    figures = analysed["figures"]
    assert stale and [s["path"] for s in figures["stale_notes"]] == stale
    assert figures["totals"]["stale_notes"] == len(stale)
    for entry in figures["stale_notes"]:
        assert entry["links_in"] >= SETTINGS.stale_min_links_in
        assert entry["days_untouched"] >= SETTINGS.stale_after_days


def test_folders_and_quality(analysed):
    expected, figures = analysed["expected"], analysed["figures"]
    for path, note in expected.items():
        assert analysed["notes"][path]["quality"] == pytest.approx(note["quality"], abs=0.051)
    assert analysed["notes"]["Inbox/Untitled.md"]["quality"] == 0
    broken_by_path = Counter(source for _, _, source, _ in analysed["vault"].broken())
    groups = defaultdict(list)
    for path, note in expected.items():
        groups[note["folder"]].append((path, note))
    assert [f["folder"] for f in figures["folders"]] == sorted(groups)
    for folder in figures["folders"]:
        group = groups[folder["folder"]]
        assert folder["notes"] == len(group)
        assert folder["words"] == sum(n["words"] for _, n in group)
        assert folder["links_out"] == sum(n["links_out"] for _, n in group)
        assert folder["links_in"] == sum(n["links_in"] for _, n in group)
        assert folder["orphans"] == sum(n["orphan"] for _, n in group)
        assert folder["broken_links"] == sum(broken_by_path[p] for p, _ in group)
        assert folder["mean_quality"] == pytest.approx(
            statistics.fmean(n["quality"] for _, n in group), abs=0.06)
    scores = [n["quality"] for n in expected.values()]
    assert figures["totals"]["mean_quality"] == pytest.approx(statistics.fmean(scores), abs=0.06)
    assert figures["quality"]["lowest"][0] == {"path": "Inbox/Untitled.md", "quality": 0.0}
    assert figures["cross_source"] == {}            # a vault alone: no tickets, no code


def test_materialization_shows_tables_and_charts(analysed):
    meta = metadata(analysed["result"], "vault_analytics")
    assert meta["snapshot_id"] == analysed["snapshot_id"] and meta["notes"] == 53
    assert "Projects/Lumen/Lumen.md" in meta["top_hubs"]
    assert (meta["orphans"], meta["broken_links"], meta["communities"]) == (
        1, 5, analysed["figures"]["totals"]["communities"])
    assert "Kafka Migration Plan" in meta["broken_link_list"]
    for chart in ("chart_community_sizes", "chart_degree_distribution"):
        encoded = re.fullmatch(r"!\[[^\]]+\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)",
                               meta[chart]).group(1)
        assert base64.b64decode(encoded).startswith(b"<?xml")
    assert "chart_trend" not in meta            # one snapshot is no trend yet
    charts_dir = analysed["config"].data_dir / "analytics" / "sample"
    assert sorted(p.name for p in charts_dir.iterdir()) == [
        "community_sizes.svg", "degree_distribution.svg"]
    found = checks(analysed["result"])
    assert found["snapshot_matches_graph"].passed
    assert found["snapshot_figures_consistent"].passed


def test_content_hash_tracks_the_graph_only(analysed):
    with duckdb.connect(str(analysed["config"].duckdb_path), read_only=True) as conn:
        first = graph_content_hash(conn, "sample")
        assert first == graph_content_hash(conn, "sample")
        stored = conn.execute("SELECT content_hash FROM analytics_snapshots").fetchone()[0]
        assert stored == first
        assert graph_content_hash(conn, "elsewhere") != first


def test_retention_and_sources_without_notes(analysed, tmp_path):
    database = tmp_path / "copy.duckdb"
    shutil.copy(analysed["config"].duckdb_path, database)
    with duckdb.connect(str(database)) as conn:
        later = analysed["generated_at"]
        for hours in (1, 2, 3):
            snapshot = compute_snapshot(conn, "sample", SETTINGS,
                                                  later + timedelta(hours=hours))
            record_snapshot(conn, snapshot, keep=2)
        kept = conn.execute("SELECT snapshot_id FROM analytics_snapshots ORDER BY 1").fetchall()
        assert [sid for (sid,) in kept] == [f"{later + timedelta(hours=h):%Y%m%dT%H%M%S%fZ}"
                                            for h in (2, 3)]
        assert conn.execute("SELECT count(DISTINCT snapshot_id), count(*) FROM analytics_notes"
                            ).fetchone() == (2, 106)
        empty = compute_snapshot(conn, "no-notes", SETTINGS, later)
    assert empty.figures["totals"]["notes"] == 0 and empty.figures["communities"] == []
    assert empty.figures["orphans"] == [] and empty.figures["cross_source"] == {}


def test_cross_source_figures(tmp_path):
    """A vault citing tickets and a commit, a ticket set and a second export of one of its
    tickets (a copy, SAME_AS the first), a repository with two authors (one under two names,
    merged into one person by the graph): figures by hand."""
    now = datetime(2026, 11, 22)
    node = lambda source, node_key, kind, title, **props: {  # noqa: E731 - a row builder
        "source": source, "node_key": node_key, "type": kind, "title": title,
        "node_source": source, "properties": json.dumps(props), "first_seen": now,
        "last_seen": now}
    edge = lambda source, origin, src, relation, dst: {  # noqa: E731 - a row builder
        "edge_key": f"{src}>{relation}>{dst}", "source": source, "origin": origin, "src": src,
        "dst": dst, "relation": relation, "confidence": "explicit",
        "extractor": "cross_reference", "evidence": [], "evidence_text": "x", "weight": 1.0}
    notes = ["a.md", "b.md", "c.md"]
    vault_tables = {
        "notes": [{"source": "v", "path": p, "note_key": f"note:v/{p}", "title": p,
                   "content_hash": p, "frontmatter": "{}", "word_count": 10, "headings": [],
                   "modified_at": now} for p in notes],
        "graph_nodes": [
            *(node("v", f"note:v/{p}", "note", p) for p in notes),
            node("t", "ticket:t/T-1", "ticket", "T-1", key="T-1", status="Done"),
            node("t", "ticket:t/T-2", "ticket", "T-2", key="T-2", status="Done"),
            node("t", "ticket:t/T-3", "ticket", "T-3", key="T-3", status="Open"),
            node("old", "ticket:old/T-1", "ticket", "T-1", key="T-1", status="Open"),
            node("r", "commit:r/1", "commit", "one"), node("r", "commit:r/2", "commit", "two"),
            node("r", "commit:r/3", "commit", "three"),
            node("r", "person:ann", "person", "Ann"), node("r", "person:bo", "person", "Bo"),
        ],
        "graph_edges": [
            edge("v", "xref:a", "note:v/a.md", "MENTIONS", "ticket:t/T-1"),
            edge("v", "xref:a", "note:v/a.md", "MENTIONS", "ticket:old/T-1"),
            edge("v", "xref:b", "note:v/b.md", "MENTIONS", "ticket:t/T-1"),
            edge("v", "xref:b", "note:v/b.md", "MENTIONS", "ticket:old/T-1"),
            edge("v", "xref:b", "note:v/b.md", "MENTIONS", "ticket:t/T-2"),
            edge("old", "xref:ticket:old/T-1", "ticket:old/T-1", "SAME_AS", "ticket:t/T-1"),
            edge("v", "xref:c", "note:v/c.md", "MENTIONS", "commit:r/1"),
            edge("r", "commit:r/2", "commit:r/2", "FIXES", "ticket:t/T-1"),
            edge("r", "commit:r/1", "person:ann", "AUTHORED", "commit:r/1"),
            edge("r", "commit:r/2", "person:ann", "AUTHORED", "commit:r/2"),
            edge("r", "commit:r/3", "person:bo", "AUTHORED", "commit:r/3"),
        ],
    }
    with duckdb.connect(str(tmp_path / "x.duckdb")) as conn:
        tables.ensure_schema(conn, registry.declared_tables())
        for table, rows in vault_tables.items():
            tables.replace_rows(conn, registry.table(table), source="any", remove_paths=None,
                               rows=rows)
        figures = {s: compute_snapshot(conn, s, SETTINGS, now).figures["cross_source"]
                   for s in ("v", "t", "r")}
    assert figures["v"]["most_cited_tickets"] == [
        {"ticket": "T-1", "title": "T-1", "citations": 2},
        {"ticket": "T-2", "title": "T-2", "citations": 1}]
    assert figures["v"]["notes_linked_to_code"] == {
        "count": 1, "notes": [{"path": "c.md", "code_nodes": 1}]}
    assert "tickets_by_status" not in figures["v"]
    assert figures["t"]["tickets_by_status"] == {"Done": 2, "Open": 1}
    assert figures["t"]["most_cited_tickets"][0] == {"ticket": "T-1", "title": "T-1",
                                                     "citations": 3}   # a, b and commit 2
    assert figures["r"]["commits_per_author"] == [{"author": "Ann", "commits": 2},
                                                  {"author": "Bo", "commits": 1}]


def test_bench_analytics_prints_timings():
    result = CliRunner().invoke(cli, ["bench", "analytics", "--notes", "300", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["notes"] == 300 and data["links"] > 300 and data["communities"] >= 2
    assert data["fresh_snapshot_seconds"] > 0 and data["uncached_context_ms"] > 0
    assert 0 < data["cached_context_p50_ms"] <= data["cached_context_p95_ms"]


def test_a_source_no_longer_configured_loses_its_history(analysed, tmp_path):
    config = write_config(tmp_path / "project", {"other": analysed["vault"].root})
    config.data_dir.mkdir(parents=True)
    shutil.copy(analysed["config"].duckdb_path, config.duckdb_path)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(source_partitions.name, ["sample"])
        result = dg.materialize([vault_analytics, vault_analytics_checks],
                                partition_key="sample", instance=instance,
                                resources=build_resources(str(config.config_path)))
    assert metadata(result, "vault_analytics")["snapshots_removed"] == 1
    assert {name: check.passed for name, check in checks(result).items()} == {
        "snapshot_matches_graph": True, "snapshot_figures_consistent": True}
    with duckdb.connect(str(config.duckdb_path), read_only=True) as conn:
        assert conn.execute("SELECT (SELECT count(*) FROM analytics_snapshots) + "
                            "(SELECT count(*) FROM analytics_notes)").fetchone() == (0,)
