"""Memory notes on disk: one new file per memory, written atomically and never over another
file; read back, found by path or id, archived (moved, never deleted or overwritten) and
faded by age and use."""

import os
from datetime import UTC, datetime, timedelta

import pytest

from jarvis_core.assistant_settings import MemorySettings
from jarvis_core.memory import MemoryNoteError, MemoryVault, clean_label
from jarvis_core.sources.vault.notes import parse_note

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def vault(tmp_path) -> MemoryVault:
    (tmp_path / "vault").mkdir()
    return MemoryVault("mem", tmp_path / "vault", MemorySettings(vault="mem", max_chars=500))


def test_a_memory_is_an_ordinary_note_with_its_provenance(vault):
    memory = vault.write("Maya reviews alert rules on **Tuesdays**.\n\nAsk her first.",
                         importance=0.8, tags=("lumen", "#people/maya"), client="claude",
                         conversation="conv-1", now=NOW)
    assert memory.path.startswith("Memories/2026/2026-03-01-120000-maya-reviews-alert-rules")
    text = (vault.root / memory.path).read_text()
    note = parse_note(text, path=memory.path)
    assert note.title == "Maya reviews alert rules on **Tuesdays**."
    assert note.frontmatter["importance"] == 0.8
    assert note.frontmatter["client"] == "claude"
    assert note.frontmatter["conversation"] == "conv-1"
    assert note.frontmatter["created"] == "2026-03-01T12:00:00Z"
    assert {"memory", "lumen", "people/maya"} <= set(note.tags)
    assert [p.name for p in (vault.root / memory.path).parent.iterdir()] == [
        memory.path.rsplit("/", 1)[1]]  # no temporary file left beside it
    again = vault.read(memory.path)
    assert (again.id, again.created, again.importance, again.archived) == (
        memory.id, NOW, 0.8, False)
    assert again.text.startswith("Maya reviews alert rules")


def test_each_memory_gets_its_own_file(vault):
    first = vault.write("same words", now=NOW)
    second = vault.write("same words", now=NOW)
    assert first.path != second.path
    assert vault.read(first.path).text == vault.read(second.path).text == "same words"


def test_writing_never_overwrites_an_existing_file(vault, monkeypatch):
    taken = vault.write("first", now=NOW)
    monkeypatch.setattr("jarvis_core.memory.secrets.token_hex", lambda n: taken.id)
    with pytest.raises(MemoryNoteError, match="already exists"):
        vault.write("first", now=NOW)
    assert vault.read(taken.path).text == "first"
    assert len(list((vault.root / taken.path).parent.iterdir())) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"text": "  "}, "text parameter is required"),
    ({"text": "x" * 501}, "at most 500 characters"),
    ({"text": "x", "importance": 1.5}, "importance must be between 0 and 1"),
    ({"text": "x", "importance": True}, "importance must be between 0 and 1"),
    ({"text": "x", "tags": ("two words",)}, "tag 'two words'"),
])
def test_bad_memories_are_refused_with_the_reason(vault, kwargs, message):
    with pytest.raises(MemoryNoteError, match=message):
        vault.write(**kwargs)
    assert not (vault.root / "Memories").exists()


def test_a_missing_vault_folder_is_said(tmp_path):
    vault = MemoryVault("mem", tmp_path / "gone", MemorySettings(vault="mem"))
    with pytest.raises(MemoryNoteError, match="memory vault folder is missing"):
        vault.write("x")


def test_found_by_id_or_path_and_nothing_outside_the_memory_folder(vault):
    memory = vault.write("find me", now=NOW)
    assert vault.find(memory.id).path == memory.path
    assert vault.find(memory.path.removesuffix(".md")).path == memory.path
    assert vault.find(f"mem/{memory.path}").path == memory.path
    (vault.root / "Other.md").write_text("not a memory")
    for name in ("Other.md", "Memories/../Other.md", "Memories/.hidden.md"):
        with pytest.raises(MemoryNoteError, match="is not a memory"):
            vault.find(name)


def test_archiving_moves_and_never_overwrites(vault):
    memory = vault.write("old news", now=NOW)
    archived = vault.archive(memory)
    assert archived.archived and archived.path == vault.archived_path(memory.path)
    assert not (vault.root / memory.path).exists()
    assert (vault.root / archived.path).read_text().endswith("old news\n")
    twin = vault.write("old news", now=NOW)
    os.rename(vault.root / twin.path, vault.root / memory.path)  # same name as the first
    second = vault.archive(vault.read(memory.path))
    assert second.path != archived.path and second.path.endswith("-1.md")
    assert (vault.root / archived.path).exists()
    with pytest.raises(MemoryNoteError, match="archived already"):
        vault.archive(second)


def test_decay_archives_old_unused_memories_only(vault):
    old_unused = vault.write("old and unused", now=NOW - timedelta(days=120))
    old_used = vault.write("old but read", now=NOW - timedelta(days=120))
    recent = vault.write("recent", now=NOW - timedelta(days=10))
    asked: list[str] = []

    def uses(documents: list[str]) -> dict[str, int]:
        asked.extend(documents)
        return {old_used.document: 2}

    report = vault.decay(uses, now=NOW)
    assert [m.path for m in report.archived] == [vault.archived_path(old_unused.path)]
    assert report.kept == 2 and report.problems == []
    assert old_unused.document in asked and recent.document not in asked  # only old ones
    assert f"mem/{vault.archived_path(old_unused.path)}" in asked  # and their archived name
    active, _ = vault.memories()
    everything, _ = vault.memories(include_archive=True)
    assert {m.path for m in active} == {old_used.path, recent.path}
    assert len(everything) == 3  # nothing deleted


def test_labels_are_one_clean_line():
    assert clean_label("a\nb\x00c") == "abc"
    assert clean_label("  ") is None
    assert len(clean_label("x" * 500)) == 200
