"""Helpers for tests of the sources and the graph: a real git repository to commit to, and a
vault ingested, chunked and extracted as the pipeline does it."""

import os
import subprocess
from pathlib import Path

from jarvis_core.sources import registry
from jarvis_core.sources.repo.sync import StoredRepo, sync_repository
from jarvis_core.sources.vault.graph import extract_vault_graph
from jarvis_core.sources.vault.ingest import StoredNotes, plan_ingest
from jarvis_core.sources.vault.scan import scan_vault
from jarvis_core.text.chunking import chunk_document

DOCS = ("README*", "docs/**/*.md")
VAULT = "sample"


class Repo:
    """A git repository in a temp dir, committed to with fixed identities and dates."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = 0
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, who: tuple[str, str] = ("Dana Kim", "dana@lumen.example")
            ) -> str:
        self.clock += 60
        date = f"2026-10-01T10:{self.clock // 60 % 60:02d}:00+00:00"
        env = {"PATH": os.environ["PATH"], "HOME": str(self.path), "GIT_CONFIG_GLOBAL": os.devnull,
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1],
               "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1],
               "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        return subprocess.run(["git", "-C", str(self.path), *args], env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def commit(self, message: str, files: dict[str, str | bytes | None],
               who: tuple[str, str] = ("Dana Kim", "dana@lumen.example")) -> str:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                self.git("rm", "-q", name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            self.git("add", name)
        self.git("commit", "-q", "-m", message, who=who)
        return self.git("rev-parse", "HEAD")

    def sync(self, stored: StoredRepo | None = None, **settings):
        options = {"branch": "HEAD", "docs": DOCS, "knowledge_dir": ".jarvis", "exclude": ()}
        return sync_repository(self.path, stored or StoredRepo(), **{**options, **settings})


class Extracted:
    """A vault ingested and chunked as the pipeline does, and its graph."""

    def __init__(self, root: Path, counter, **options) -> None:
        scan = scan_vault(root)
        plan = plan_ingest(VAULT, scan, StoredNotes.none(), max_note_bytes=10_000_000)
        # through the table schema, so rows look as DuckDB/polars hand them over
        self.notes = registry.table("notes").frame(plan.note_rows).to_dicts()
        self.chunk_text: dict[str, str] = {}
        self.chunks = []
        for row in self.notes:
            for chunk in chunk_document(row["body"], title=row["title"], doc_key=row["note_key"],
                                        counter=counter):
                self.chunk_text[chunk.chunk_id] = chunk.text
                self.chunks.append({"chunk_id": chunk.chunk_id, "path": row["path"],
                                    "char_start": chunk.char_start, "char_end": chunk.char_end})
        self.attachments = {file.path for file in scan.attachments}
        self.graph = extract_vault_graph(VAULT, self.notes, self.chunks,
                                         attachments=self.attachments, **options)

    def edges(self, relation=None, extractor=None, origin=None, confidence=None):
        return [e for e in self.graph.edges if (relation in (None, e.relation))
                and (extractor in (None, e.extractor)) and (origin in (None, e.origin))
                and (confidence in (None, e.confidence))]

    def triples(self, **filters) -> set[tuple[str, str, str]]:
        return {(e.src, e.relation, e.dst) for e in self.edges(**filters)}
