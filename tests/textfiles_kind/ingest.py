"""Reading a text folder: every ``.txt`` file whose bytes changed is stored again."""

from datetime import UTC, datetime
from pathlib import Path

from jarvis_core.sources.changes import file_hashes
from jarvis_core.sources.kind import Ingested, IngestRun, SourceUnreachable
from jarvis_core.sources.plan import ItemCounts
from jarvis_core.stores import tables
from tests.textfiles_kind.tables import TEXT_FILES


def text_files(root: Path) -> list[tuple[Path, str]]:
    return [(path, path.relative_to(root).as_posix()) for path in sorted(root.glob("*.txt"))]


def ingest(run: IngestRun) -> Ingested:
    root = run.settings.path if run.settings is not None else None
    if root is not None and not root.is_dir():
        raise SourceUnreachable(f"text folder does not exist: {root}")
    files = text_files(root) if root is not None else []
    hashes = file_hashes(files)
    with run.connect() as conn:
        stored = dict(conn.execute("SELECT path, file_hash FROM text_files WHERE source = ?",
                                   [run.source]).fetchall())
        rewrite = [relative for relative, digest in hashes.items()
                   if stored.get(relative) != digest]
        rows = []
        for file, relative in files:
            if relative in rewrite:
                text = file.read_text(encoding="utf-8")
                rows.append({"source": run.source, "path": relative,
                             "title": text.split("\n", 1)[0].strip() or file.stem, "text": text,
                             "file_hash": hashes[relative], "ingested_at": run.now,
                             "modified_at": datetime.fromtimestamp(file.stat().st_mtime, UTC)
                             .replace(tzinfo=None)})
        deleted = sorted(set(stored) - set(hashes))
        tables.replace_rows(conn, TEXT_FILES, source=run.source,
                            remove_paths=rewrite + deleted, rows=rows)
    counts = ItemCounts(new=len(set(rewrite) - set(stored)),
                        changed=len(set(rewrite) & set(stored)),
                        unchanged=len(hashes) - len(rewrite), deleted=len(deleted))
    return Ingested(counts=counts.as_dict(), rows=len(hashes),
                    location=str(root) if root else None, preview=rows,
                    preview_columns=("path", "title"))
