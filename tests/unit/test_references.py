"""Ticket, commit and path references in free text, checked against the sample vault's
documented references (sample_data/VAULT_FEATURES.md §5 and §14), and their resolution."""

from pathlib import Path

import pytest

from jarvis_core.sources.references import (
    COMMIT,
    FIXES,
    GITHUB,
    JIRA,
    MENTIONS,
    PATH,
    ReferenceIndex,
    chunks_holding,
    find_references,
    line_text,
)

VAULT = Path(__file__).resolve().parents[2] / "sample_data" / "vault"


def targets(text: str, kind: str, **kwargs) -> list[str]:
    return [ref.target for ref in find_references(text, **kwargs) if ref.kind == kind]


@pytest.fixture(scope="module")
def vault_references() -> dict[str, list]:
    return {path.relative_to(VAULT).as_posix(): find_references(path.read_text("utf-8"))
            for path in sorted(VAULT.rglob("*.md"))}


def test_every_documented_ticket_of_the_vault_is_found(vault_references):
    jira = {ref.target for refs in vault_references.values() for ref in refs if ref.kind == JIRA}
    assert {f"LUM-{n}" for n in range(1, 13)} <= jira
    github = {ref.target for refs in vault_references.values() for ref in refs
              if ref.kind == GITHUB}
    assert github == {"lumen#7", "lumen#15"}


def test_documented_lines_hold_the_references(vault_references):
    def at(path, line, kind):
        return {ref.target for ref in vault_references[path] if ref.line == line
                and ref.kind == kind}
    assert at("Meetings/2026/2026-11-04 Alerting Design Sync.md", 22, JIRA) == {"LUM-4", "LUM-6"}
    assert at("Projects/Lumen/Architecture/Architecture Overview.md", 138, GITHUB) == {"lumen#7"}
    assert at("Projects/Lumen/Architecture/Dashboard.md", 26, GITHUB) == {"lumen#15"}
    assert at("Projects/Lumen/Roadmap.md", 27, JIRA) == {"LUM-8"}
    # 13 lines outside code and one Python comment cite lumen#7 / lumen#15 (feature map §5)
    lines = {(path, ref.line) for path, refs in vault_references.items() for ref in refs
             if ref.kind == GITHUB}
    assert len(lines) == 14
    assert ("Projects/Lumen/Architecture/Ingest API.md", 54) in lines


def test_numbers_after_a_hash_in_prose_are_not_references(vault_references):
    daily = vault_references["Daily/2026-10-12.md"]  # "CI build #123 failed ..."
    conventions = vault_references["Areas/Knowledge/Vault Conventions.md"]  # "issue #123"
    assert not [ref for ref in daily + conventions if "123" in ref.target]
    assert targets("CI build #123 failed", GITHUB, default_repo="lumen") == []


def test_skip_lines_drop_code(vault_references):
    path = VAULT / "Projects/Lumen/Architecture/Ingest API.md"
    kept = find_references(path.read_text("utf-8"), skip_lines={54})
    assert 54 not in {ref.line for ref in kept if ref.kind == GITHUB}


def test_jira_key_forms():
    assert targets("LUM-6 stays blocked on LUM-4", JIRA) == ["LUM-6", "LUM-4"]
    assert targets("[LUM-4] Dedupe readings", JIRA) == ["LUM-4"]
    assert targets("Merge branch 'feature/LUM-6-alert-rules'", JIRA) == ["LUM-6"]
    assert targets("Merge branch 'feature/lum-9-rate-limit' into main", JIRA) == ["LUM-9"]
    assert targets("Merge pull request #3 from maya/lum-11-offsets", JIRA) == ["LUM-11"]
    assert targets("xLUM-4, LUM-04, LUM-4x, lum-4 in prose", JIRA) == []
    [ref] = find_references("Fixes LUM-4: dedupe")
    assert (ref.relation, ref.start, ref.end, ref.written) == (FIXES, 6, 11, "LUM-4")


def test_a_bracketed_key_with_a_letter_suffix_cites_its_ticket():
    # real commit subjects: a second and third commit for one ticket
    assert targets("[ABC-784d] fix the retry of a failed upload", JIRA) == ["ABC-784"]
    assert targets("[ABC-12B] Revert [ABC-12]", JIRA) == ["ABC-12", "ABC-12"]
    [ref] = find_references("fixes [ABC-784d]")
    assert (ref.relation, ref.written) == (FIXES, "ABC-784")
    # only one letter, only in brackets, only after a key: words and hashes stay what they are
    assert targets("ABC-784d [ABC-784de] [abc-784d] [ABC-784d [ABC-0a] [deadbee1] [x-1a]",
                   JIRA) == []


def test_github_forms():
    assert targets("see example/lumen#15 and lumen#7", GITHUB) == ["example/lumen#15",
                                                                  "lumen#7"]
    assert targets("https://github.com/example/lumen/issues/7 and /pull/16",
                   GITHUB) == ["example/lumen#7"]
    refs = find_references("Fixes #15, closes: #2; Merge pull request #16 from x/y",
                           default_repo="lumen")
    assert [(r.target, r.relation) for r in refs if r.kind == GITHUB] == [
        ("lumen#15", FIXES), ("lumen#2", FIXES), ("lumen#16", MENTIONS)]
    assert targets("Fixes #15", GITHUB) == []  # no repository known: no guess
    assert targets("colour #fff and heading #1", GITHUB, default_repo="lumen") == []


def test_commit_hashes_need_word_boundaries_letters_and_digits():
    assert targets("reverts 3f2a9c1 and a1b2c3d4e5f6", COMMIT) == ["3f2a9c1", "a1b2c3d4e5f6"]
    assert targets("1234567 deadbeef face-3f2a9c1 3f2a9c1x 3f2a9c", COMMIT) == []
    assert targets("@5f1a0c2b7d3e4a0011aa0004 #3f2a9c1", COMMIT) == []


def test_paths_outside_urls():
    assert targets("edit ingest/writer.py and docs/api.md.", PATH) == [
        "ingest/writer.py", "docs/api.md"]
    assert targets("https://example.com/ingest/writer.py", PATH) == []


def test_line_and_span_evidence():
    text = "first line\nsecond LUM-4 line\n"
    [ref] = find_references(text)
    assert (ref.line, text[ref.start:ref.end]) == (2, "LUM-4")
    assert line_text(text, ref.start) == "second LUM-4 line"
    chunks = [(0, 15, "a"), (11, 29, "b")]
    assert chunks_holding(chunks, ref.start, ref.end) == ("b",)
    assert chunks_holding([(0, 20, "a"), (20, 29, "b")], 18, 23) == ("a", "b")


def test_index_resolves_against_nodes_of_every_source():
    sha = "3f2a9c1d" + "0" * 32
    nodes = [
        {"node_key": "ticket:jira/LUM-4", "type": "ticket",
         "properties": {"system": "jira", "key": "LUM-4"}},
        {"node_key": "ticket:gh/lumen#7", "type": "ticket",
         "properties": '{"system": "github", "repo": "lumen", "repo_full": "example/lumen", '
                       '"number": 7}'},
        {"node_key": f"commit:lumen/{sha}", "type": "commit", "properties": {"sha": sha}},
        {"node_key": "commit:other/3f2a9c1e", "type": "commit",
         "properties": {"sha": "3f2a9c1e" + "1" * 32}},
        {"node_key": "file:lumen/ingest/writer.py", "type": "file",
         "properties": {"path": "ingest/writer.py"}},
    ]
    index = ReferenceIndex(nodes)
    assert index.resolve(JIRA, "LUM-4") == (("ticket:jira/LUM-4",), "resolved")
    assert index.resolve(JIRA, "LUM-13") == ((), "unresolved")
    assert index.resolve(JIRA, "UTF-8") == ((), "unknown_project")
    for written in ("lumen#7", "example/lumen#7", "Example/Lumen#7"):
        assert index.resolve(GITHUB, written) == (("ticket:gh/lumen#7",), "resolved")
    assert index.resolve(GITHUB, "lumen#99") == ((), "unresolved")
    assert index.resolve(COMMIT, "3f2a9c1d") == ((f"commit:lumen/{sha}",), "resolved")
    assert index.resolve(COMMIT, "3f2a9c1")[1] == "ambiguous"
    assert index.resolve(COMMIT, "9f3ac2e1b07d") == ((), "no_such_commit")
    assert index.resolve(PATH, "ingest/writer.py") == (("file:lumen/ingest/writer.py",),
                                                       "resolved")


@pytest.fixture(scope="module")
def vault_graph():
    from jarvis_core.text.tokens import token_counter
    from tests.source_helpers import Extracted
    return Extracted(VAULT, token_counter("all-MiniLM-L6-v2"))


def test_vault_graph_records_the_documented_references_outside_code(vault_graph):
    references = vault_graph.graph.references
    commits = {(ref.origin.removeprefix("note:sample/"), ref.line, ref.target)
               for ref in references if ref.kind == COMMIT}
    # VAULT_FEATURES.md §14: the only commits cited; the boot_id in a JSON code block is not
    assert commits == {("Projects/Lumen/Architecture/Ingest API.md", 144, "c97437b"),
                       ("Projects/Lumen/Architecture/Ingest API.md", 146, "5d24297")}
    github = {(ref.origin.removeprefix("note:sample/"), ref.line) for ref in references
              if ref.kind == GITHUB}
    assert len(github) == 13  # §5: 13 lines outside code; the Python comment is skipped
    assert ("Projects/Lumen/Architecture/Ingest API.md", 54) not in github
    assert {ref.target for ref in references if ref.kind == JIRA} >= {
        f"LUM-{n}" for n in range(1, 13)}
    assert not [ref for ref in references if ref.kind == PATH]  # notes cite no repo paths
    for ref in references:
        assert ref.evidence, ref  # every reference sits in a chunk
        assert ref.written in ref.evidence_text or len(ref.evidence_text) == 300
        assert all(vault_graph.chunk_text[c] for c in ref.evidence)


def test_a_changed_reference_changes_only_its_notes_fingerprint(vault_graph, tmp_path):
    import shutil

    from jarvis_core.text.tokens import token_counter
    from tests.source_helpers import Extracted
    shutil.copytree(VAULT, tmp_path / "vault")
    note = tmp_path / "vault" / "Projects/Lumen/Architecture/Dashboard.md"
    note.write_text(note.read_text("utf-8").replace("lumen#15", "lumen#16"), "utf-8")
    edited = Extracted(tmp_path / "vault", token_counter("all-MiniLM-L6-v2")).graph
    changed = {origin for origin, fingerprint in edited.fingerprints.items()
               if vault_graph.graph.fingerprints[origin] != fingerprint}
    assert changed == {"note:sample/Projects/Lumen/Architecture/Dashboard.md"}


def test_a_note_citing_a_message_or_a_page_in_prose_records_them(tmp_path):
    from jarvis_core.sources.references import MESSAGE, PAGE
    from jarvis_core.text.tokens import token_counter
    from tests.source_helpers import Extracted

    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "Decision.md").write_text(
        "# Decision\n\nAgreed in Message-ID: <cafe.42@lumen.example>, written up at\n"
        "https://wiki.lumen.example/spaces/LUM/pages/65541/Ingest and LUM-4.\n\n"
        "```\nMessage-ID: <in.code@lumen.example>\n```\n", "utf-8")
    found = {(ref.kind, ref.target, ref.line) for ref in Extracted(
        tmp_path / "vault", token_counter("all-MiniLM-L6-v2")).graph.references}
    assert (MESSAGE, "cafe.42@lumen.example", 3) in found
    assert (PAGE, "65541", 4) in found
    assert not [ref for ref in found if ref[1] == "in.code@lumen.example"]  # code is skipped
