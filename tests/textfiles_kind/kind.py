"""The text-folder kind."""

from jarvis_core.sources.changes import export_watch
from jarvis_core.sources.kind import DocumentType, RawAsset, SourceKind
from tests.textfiles_kind.ingest import text_files
from tests.textfiles_kind.settings import TextFilesConfig

TEXT_FILES = SourceKind(
    name="textfiles", package=__package__, section="textfiles", label="text folder",
    settings=TextFilesConfig,
    asset=RawAsset("raw_text_files", "The .txt files of one text folder (partition).",
                   ("duckdb", "text")),
    documents=(DocumentType("text", """
        SELECT source, 'text' AS source_type, 'text:' || source || '/' || path AS doc_key,
               path, title, text, file_hash AS doc_hash, modified_at, []::VARCHAR[] AS tags,
               [lower(title)] AS names
        FROM text_files WHERE source = $1"""),),
    serving={"text_files": "SELECT * EXCLUDE (text) FROM text_files"},
    counts={"text_files": "text_files"},
    ingested="text_files",
    watch=export_watch(text_files, "text_files"),
)
