"""Scanning and reading vault files: every bad input is a reason, never an exception."""

import os
from pathlib import Path

import pytest

from jarvis_core.sources.vault.scan import NoteReadError, VaultFile, read_note, scan_vault


def _file(path: Path, root: Path) -> VaultFile:
    stat = path.stat()
    return VaultFile(path.relative_to(root).as_posix(), path, stat.st_size, stat.st_mtime_ns)


def test_scan_lists_notes_and_attachments_and_skips_hidden(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "deep.md").write_text("# deep")
    (tmp_path / "top.md").write_text("top")
    (tmp_path / "img.png").write_bytes(b"\x89PNG")
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / ".obsidian" / "app.json").write_text("{}")
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / "skip.md").write_text("x")
    scan = scan_vault(tmp_path, exclude=("drafts/**",))
    assert [f.path for f in scan.notes] == ["a/b/deep.md", "top.md"]
    assert [f.path for f in scan.attachments] == ["img.png"]
    assert scan.problems == []


def test_symlink_loops_and_dangling_links_are_reported(tmp_path):
    (tmp_path / "ok.md").write_text("fine")
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path, tmp_path / "sub" / "back")        # directory loop
    os.symlink("self.md", tmp_path / "self.md")             # a link to itself
    os.symlink(tmp_path / "missing.md", tmp_path / "dangling.md")
    scan = scan_vault(tmp_path)
    assert [f.path for f in scan.notes] == ["ok.md"]
    reasons = {p.path: p.reason for p in scan.problems}
    assert reasons["sub/back"].startswith("symlink loop")
    assert reasons["self.md"].startswith("symlink loop")
    assert reasons["dangling.md"].startswith("broken symlink")


def test_plain_utf8_note_is_read_and_hashed(tmp_path):
    path = tmp_path / "n.md"
    path.write_text("héllo 世界", encoding="utf-8")
    text, digest, warnings = read_note(_file(path, tmp_path), max_bytes=1000)
    assert text == "héllo 世界" and len(digest) == 64 and warnings == []


def test_invalid_utf8_is_decoded_with_a_warning(tmp_path):
    path = tmp_path / "latin1.md"
    path.write_bytes("Café au lait, a note written in Latin-1. ".encode("latin-1") * 3)
    text, _, warnings = read_note(_file(path, tmp_path), max_bytes=10_000)
    assert "Caf\ufffd au lait" in text
    assert warnings == ["invalid UTF-8 at byte 3; undecodable bytes replaced with U+FFFD"]


def test_utf16_with_byte_order_mark(tmp_path):
    path = tmp_path / "u16.md"
    path.write_bytes("# Title\nbody".encode("utf-16"))
    text, _, warnings = read_note(_file(path, tmp_path), max_bytes=10_000)
    assert text == "# Title\nbody" and "UTF-16" in warnings[0]


@pytest.mark.parametrize("content, reason", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), r"binary content \(NUL bytes\)"),
    (bytes(range(128, 256)) * 20, "binary or non-UTF-8 content"),
])
def test_binary_files_named_md_are_refused(tmp_path, content, reason):
    path = tmp_path / "image.md"
    path.write_bytes(content)
    with pytest.raises(NoteReadError, match=reason):
        read_note(_file(path, tmp_path), max_bytes=100_000)


def test_empty_note_reads_as_empty_text(tmp_path):
    path = tmp_path / "empty.md"
    path.write_bytes(b"")
    assert read_note(_file(path, tmp_path), max_bytes=10)[0] == ""


def test_note_over_the_size_limit_is_refused_without_reading(tmp_path):
    path = tmp_path / "huge.md"
    with path.open("wb") as handle:          # 50 MB, sparse: the limit is checked on stat
        handle.truncate(50 * 1024 * 1024)
    with pytest.raises(NoteReadError, match=r"file is 50.0 MB, over the 10.0 MB limit"):
        read_note(_file(path, tmp_path), max_bytes=10 * 1024 * 1024)


def test_unreadable_file_is_refused_with_the_os_reason(tmp_path, monkeypatch):
    path = tmp_path / "secret.md"
    path.write_text("private")
    path.chmod(0)
    if os.geteuid() == 0:  # root reads anything: make the read fail as the OS would for a user
        def denied(self):
            raise PermissionError(13, "Permission denied", str(self))
        monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(NoteReadError, match="cannot read file: Permission denied"):
        read_note(_file(path, tmp_path), max_bytes=1000)


def test_notes_go_to_the_writer_a_batch_at_a_time_and_nothing_changes():
    """A vault's parsed notes are written ``batch_notes`` at a time (never all in memory):
    the batches and what is left are the notes one plan holds."""
    from jarvis_core.sources.vault.ingest import StoredNotes, plan_ingest
    from tests.pipeline_helpers import SAMPLE_VAULT

    def without_time(rows):
        return sorted(({k: v for k, v in row.items() if k != "ingested_at"} for row in rows),
                      key=lambda row: row["path"])

    whole = plan_ingest("s", scan_vault(SAMPLE_VAULT), StoredNotes.none(), 1_000_000)
    batches = []
    rest = plan_ingest("s", scan_vault(SAMPLE_VAULT), StoredNotes.none(), 1_000_000,
                       write_batch=batches.append, batch_notes=4)
    assert [len(batch.note_rows) for batch in batches] == [4] * (len(whole.note_rows) // 4)
    assert all(batch.removed_paths == {row["path"] for row in batch.note_rows}
               for batch in batches)
    written = [row for batch in batches for row in batch.note_rows] + rest.note_rows
    assert without_time(written) == without_time(whole.note_rows)
    assert rest.counts() == whole.counts() and rest.preview == batches[0].note_rows
