"""read-note and list-vaults: notes read from disk, every way out of a vault refused, and the
`jarvis read` / `jarvis vaults` commands."""

import json
import os

import pytest
import yaml
from click.testing import CliRunner

from jarvis_cli.main import cli
from jarvis_core.config import load_config
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from jarvis_query.lookup import DocumentNotFound
from jarvis_query.reading import NoteAccessError, _read_file

SECRET = "TOP SECRET: the launch codes"
PLAN = """---
tags: [project]
aliases: ["The Plan"]
---
# Plan

Ship it with #launch/q4 after [[Shared]].
"""


@pytest.fixture
def setup(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    a, b = tmp_path / "vault_a", tmp_path / "vault_b"
    for folder in (a / "Projects", a / "Archive", a / ".obsidian", b):
        folder.mkdir(parents=True)
    (a / "Projects" / "Plan.md").write_text(PLAN)
    (a / "Shared.md").write_text("# Shared in a\n")
    (b / "Shared.md").write_text("# Shared in b\n")
    (a / "Archive" / "Old.md").write_text("old\n")
    (a / ".obsidian" / "app.json").write_text("{}")
    (a / "data.csv").write_text("x,y\n")
    (a / "100% done.md").write_text("literally a percent sign\n")
    (a / "Café.md").write_text("# Café\n")
    (a / "Latin.md").write_bytes(b"# Caf\xe9 au lait\n")
    (a / "Big.md").write_text("x" * 5000)
    (a / "Leak.md").symlink_to(outside / "secret.md")
    (a / "Linked").symlink_to(outside, target_is_directory=True)
    (a / "Alias.md").symlink_to(a / "Projects" / "Plan.md")
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "tickets.json").write_text("[]")
    project = tmp_path / "project"
    project.mkdir()
    (project / "jarvis.yaml").write_text(yaml.safe_dump({
        "data_dir": "data",
        "vaults": {"a": {"path": str(a), "exclude": ["Archive/**"]}, "b": str(b)},
        "repos": {"code": str(repo)},
        "tickets": {"issues": str(tmp_path / "tickets.json")},
        "ingest": {"max_note_bytes": 4096},
    }))
    config = load_config(project / "jarvis.yaml")
    kb = KnowledgeBase(config)
    yield kb, outside
    kb.close()


TRAVERSALS = [
    "../outside/secret.md", "../../../../etc/passwd", "/etc/passwd",
    "Projects/../../outside/secret.md", "Projects/../Shared.md",
    "..%2foutside%2fsecret.md", "%2e%2e/outside/secret.md", "%2E%2E%2Foutside/secret.md",
    "%252e%252e%252foutside/secret.md", "%25252e%25252e/outside/secret.md",
    "%c0%ae%c0%ae/outside/secret.md", "Projects%5c..%5c..%5coutside%5csecret.md",
    "..\\outside\\secret.md", "Projects\\Plan.md", "secret.md\x00.md", "Projects/Plan.md\x00",
    "Projects/Plan.md%00", "Projects/\x1bPlan.md",
    "．．/outside/secret.md", "..／outside／secret.md", "‥/outside/secret.md",
    "Projects/Plan\u202e.md", "\u200b../outside/secret.md",
    "~/secret.md", "C:/outside/secret.md", "c:secret.md",
    "Leak.md", "Leak", "Linked/secret.md", "a/Linked/secret", ".obsidian/app.json",
    "Projects/.hidden.md",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_paths_leading_out_of_the_vault_are_refused(setup, path):
    kb, outside = setup
    with pytest.raises(NoteAccessError, match="^Access denied: ") as refused:
        kb.read_note(path)
    assert SECRET not in str(refused.value) and str(outside) not in str(refused.value)


def test_absolute_path_to_a_real_file_is_refused(setup):
    kb, outside = setup
    with pytest.raises(NoteAccessError, match="absolute paths are not allowed"):
        kb.read_note(str(outside / "secret.md"))
    with pytest.raises(NoteAccessError, match="'..' is not allowed"):
        kb.read_note("../outside/secret.md", vault="b")
    with pytest.raises(NoteAccessError, match="longer than"):
        kb.read_note("a/" * 600 + "x.md")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to see open files")
def test_a_file_that_turns_out_to_be_outside_when_opened_is_refused(setup):
    """What a folder swapped for an outward symlink between the check and the open yields."""
    kb, outside = setup
    with pytest.raises(NoteAccessError, match="changed while being opened"):
        _read_file(kb.config.sources["a"].path, outside / "secret.md", "Leak.md", 4096)


def test_a_note_is_read_from_disk_with_frontmatter_and_tags(setup):
    kb, _ = setup
    note = kb.read_note("Projects/Plan", vault="a")
    assert (note["vault"], note["path"], note["title"]) == ("a", "Projects/Plan.md", "Plan")
    assert note["content"] == PLAN
    assert note["details"]["frontmatter"] == {"tags": ["project"], "aliases": ["The Plan"]}
    assert note["tags"] == ["project", "launch/q4"]
    assert note["details"]["aliases"] == ["The Plan"]
    assert note["details"]["size_bytes"] == len(PLAN.encode()) and note["warnings"] == []
    # nothing published yet: the file is still read, the graph part says so
    assert note["published"] is False and note["links"] is None and note["backlinks"] is None
    for spelling in ("a/Projects/Plan.md", "./Projects//Plan.md", "Projects/Plan.md"):
        assert kb.read_note(spelling)["path"] == "Projects/Plan.md"


def test_paths_that_only_look_odd_are_read(setup):
    kb, _ = setup
    assert kb.read_note("100% done")["content"] == "literally a percent sign\n"
    assert kb.read_note("Café.md")["title"] == "Café"
    linked = kb.read_note("Alias.md")  # a symlink that stays inside the vault
    assert linked["path"] == "Alias.md" and linked["content"] == PLAN
    latin = kb.read_note("Latin")
    assert "\ufffd" in latin["content"] and "invalid UTF-8" in latin["warnings"][0]


def test_clear_errors(setup):
    kb, _ = setup
    cases = [
        ({"path": "Nope.md"}, DocumentNotFound, r"^'Nope.md' names no note on disk in any "
                                                r"vault, and nothing else is published yet$"),
        ({"path": "Plan.md", "vault": "b"}, DocumentNotFound, "names no note on disk in 'b'"),
        ({"path": "Shared"}, QueryError, "names notes in several vaults: a/Shared.md, "
                                         "b/Shared.md; give the vault"),
        ({"path": "Shared", "vault": "zzz"}, QueryError, "Unknown vault 'zzz'"),
        ({"path": "  "}, QueryError, "path parameter is required"),
        ({"path": "./"}, QueryError, "path parameter is required"),
        ({"path": "Archive/Old"}, NoteAccessError, "excluded from vault 'a'"),
        ({"path": "data.csv"}, NoteAccessError, "is not a note"),
        ({"path": "Projects"}, DocumentNotFound, "names no note on disk"),
        ({"path": "Big.md"}, NoteAccessError, "5000 bytes, over the 4096 byte limit"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            kb.read_note(**kwargs)
    assert kb.read_note("Shared", vault="b")["content"] == "# Shared in b\n"


def test_list_vaults_before_anything_is_published(setup):
    kb, _ = setup
    data = kb.list_vaults()
    assert data["published"] is None
    assert [(v["name"], v["kind"], v["notes"]) for v in data["vaults"]] == [
        ("a", "vault", 0), ("b", "vault", 0)]
    assert data["vaults"][0]["path"] == os.path.realpath(kb.config.sources["a"].path)
    assert [(s["name"], s["kind"]) for s in data["other_sources"]] == [
        ("code", "repo"), ("issues", "tickets")]
    assert all(s["last_refresh"] is None for s in data["vaults"] + data["other_sources"])


def test_cli_read_and_vaults(setup):
    kb, _ = setup
    config = str(kb.config.config_path)

    def invoke(*args):
        return CliRunner().invoke(cli, ["--config", config, *args], catch_exceptions=False)

    readable = invoke("read", "Projects/Plan", "--vault", "a")
    assert readable.exit_code == 0, readable.output
    assert readable.output.startswith("# Plan  (a/Projects/Plan.md")
    assert "tags: #project #launch/q4" in readable.output and PLAN in readable.output
    as_json = json.loads(invoke("read", "Projects/Plan", "--json").stdout)
    assert as_json["content"] == PLAN and as_json["vault"] == "a"

    refused = invoke("read", "../outside/secret.md")
    assert refused.exit_code == 1
    assert "Error: Access denied: '..' is not allowed" in refused.output
    assert SECRET not in refused.output
    missing = invoke("read", "Nope")
    assert missing.exit_code == 1 and "'Nope' names no note on disk" in missing.output

    vaults = invoke("vaults")
    assert vaults.exit_code == 0, vaults.output
    assert "nothing published yet" in vaults.output
    assert "- a (vault, " in vaults.output and "- code (repo, " in vaults.output
    listed = json.loads(invoke("vaults", "--json").stdout)
    assert [v["name"] for v in listed["vaults"]] == ["a", "b"]
