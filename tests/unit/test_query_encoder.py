"""The light query path: all-MiniLM-L6-v2 exported once for the module, then encoded with
onnxruntime and tokenizers alone. The comparison with the ingest embedder on 1,000 real
chunks is in tests/e2e/test_query_encoder_equivalence.py."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from jarvis_core.text import export
from jarvis_core.text.export import ExportError, export_key, export_query_model
from jarvis_core.text.query_encoder import QueryEncoder, QueryEncoderError
from jarvis_core.text.tokens import resolve_model_dir

MODEL = "all-MiniLM-L6-v2"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
HEAVY_MODULES = ("torch", "transformers", "sentence_transformers", "dagster")
QUERIES = [
    "How does the ingest pipeline retry failed uploads?",
    "Lunch?",
    "Quarterly revenue grew by ten percent, driven by the new enterprise plan and by renewals "
    "of the two largest accounts, while churn among small customers stayed flat.",
    "Alice owns the ingest pipeline.",
    "",
    "Café naïve façade — Straße, 日本語の文章",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("query-model") / "all-minilm"
    export_query_model(MODEL, directory)
    return directory


@pytest.fixture(scope="module")
def encoder(exported) -> QueryEncoder:
    return QueryEncoder.load(exported)


def model_copy(directory: Path, replaced: dict[str, str] | None = None) -> Path:
    """The bundled model as links in ``directory``, with some files given new content."""
    source = resolve_model_dir(MODEL)
    for path in source.rglob("*"):
        if path.is_file():
            target = directory / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    for relative, content in (replaced or {}).items():
        (directory / relative).unlink(missing_ok=True)
        (directory / relative).write_text(content)
    return directory


def test_export_is_a_self_contained_directory_with_a_manifest(exported):
    manifest = json.loads((exported / "manifest.json").read_text())
    assert sorted(p.name for p in exported.iterdir()) == [
        "manifest.json", "model.onnx", "model.onnx.data", "tokenizer.json"]
    assert (manifest["model"], manifest["dimension"], manifest["max_seq_length"],
            manifest["query_prompt"]) == (MODEL, 384, 256, "")
    assert manifest["exporter"]["method"] in ("torchscript", "dynamo")
    for name, entry in manifest["files"].items():
        content = (exported / name).read_bytes()
        assert (len(content), hashlib.sha256(content).hexdigest()) == (
            entry["bytes"], entry["sha256"])


def test_export_is_deterministic(exported):
    """This module's fresh export has the files of the one the pipeline made (in another
    process, for the session's model cache)."""
    from tests.query_helpers import exported_encoder

    first, second = (json.loads((d / "manifest.json").read_text())
                     for d in (exported_encoder(), exported))
    assert first["files"] == second["files"]


def test_tokenizer_cuts_and_pads_as_the_model_does(exported):
    tokenizer = json.loads((exported / "tokenizer.json").read_text())
    assert tokenizer["truncation"]["max_length"] == 256
    assert tokenizer["padding"]["strategy"] == "BatchLongest"


def test_an_unchanged_model_is_not_exported_again(exported):
    before = {p.name: p.stat().st_mtime_ns for p in exported.iterdir()}
    result = export_query_model(MODEL, exported)
    assert result.reused and (result.dimension, result.directory) == (384, exported)
    assert {p.name: p.stat().st_mtime_ns for p in exported.iterdir()} == before


def test_an_unchanged_model_is_recognised_without_hashing_its_weights(exported, monkeypatch):
    monkeypatch.setattr(export, "_file_sha256", lambda path: pytest.fail(f"{path} was hashed"))
    assert export_query_model(MODEL, exported).reused


def test_an_export_of_an_older_jarvis_is_recognised_by_content_and_signed(exported, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(exported, older)
    manifest = json.loads((older / "manifest.json").read_text())
    signature = manifest.pop("source_signature")
    (older / "manifest.json").write_text(json.dumps(manifest))
    published = tmp_path / "published-manifest.json"
    published.hardlink_to(older / "manifest.json")  # as a serving version links it
    assert export_query_model(MODEL, older).reused
    assert json.loads((older / "manifest.json").read_text())["source_signature"] == signature
    assert "source_signature" not in json.loads(published.read_text())


def test_export_key_follows_the_content_of_the_model_files(tmp_path):
    model_dir = model_copy(tmp_path / "model")
    key = export_key(MODEL, model_dir)
    assert key.startswith(f"{MODEL}-") and export_key(MODEL, model_dir) == key
    (model_dir / ".cache").mkdir()
    (model_dir / ".cache" / "download.lock").write_text("download metadata")
    assert export_key(MODEL, model_dir) == key
    readme = (model_dir / "README.md").read_text()
    model_copy(tmp_path / "edited", {"README.md": readme + "\nOne more line.\n"})
    assert export_key(MODEL, tmp_path / "edited") != key
    assert export_key("another-name", model_dir) != key


def test_vectors_are_unit_length_float32_rows_in_input_order(encoder):
    vectors = encoder.encode(QUERIES)
    assert vectors.shape == (len(QUERIES), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    one_by_one = np.stack([encoder.embed_query(query) for query in QUERIES])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)  # padding changes nothing
    assert (encoder.model, encoder.dimension) == (MODEL, 384)


def test_similar_texts_are_closer_than_unrelated_ones(encoder):
    retry, backoff, lunch = encoder.encode([
        "The upload is retried with exponential backoff.",
        "Failed uploads are attempted again after waiting longer each time.",
        "We had pasta for lunch.",
    ])
    assert retry @ backoff > retry @ lunch + 0.2


def test_text_past_the_model_limit_is_cut(encoder):
    long_text = " ".join(f"word{index}" for index in range(600))
    assert encoder.tokenize([long_text])["input_ids"].shape == (1, 256)
    np.testing.assert_allclose(encoder.embed_query(long_text),
                               encoder.embed_query(long_text + " and a tail it never reads"),
                               atol=1e-6)


def test_encode_takes_a_sequence_of_texts(encoder):
    with pytest.raises(TypeError, match="embed_query"):
        encoder.encode("one query")
    assert encoder.encode([]).shape == (0, 384)


def test_threads_sharing_one_encoder_get_the_vectors_of_a_lone_caller(encoder):
    texts = [f"{query} (variant {index})" for index in range(8) for query in QUERIES]
    alone = np.stack([encoder.embed_query(text) for text in texts])
    with ThreadPoolExecutor(max_workers=4) as pool:
        shared = np.stack(list(pool.map(encoder.embed_query, texts)))
    np.testing.assert_allclose(shared, alone, atol=1e-6)


def test_a_fresh_process_encodes_without_torch_transformers_or_dagster(exported, encoder):
    script = (
        "import json, sys\n"
        "from jarvis_core.text.query_encoder import QueryEncoder\n"
        f"vector = QueryEncoder.load(sys.argv[1]).embed_query({QUERIES[0]!r})\n"
        f"heavy = [name for name in {HEAVY_MODULES!r} if name in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'vector': vector.tolist()}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, str(exported)], capture_output=True, text=True,
        cwd=PROJECT_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=True)
    answer = json.loads(completed.stdout)
    assert answer["heavy"] == []
    np.testing.assert_allclose(answer["vector"], encoder.embed_query(QUERIES[0]), atol=1e-6)


def test_loading_a_directory_without_an_export_names_it(tmp_path):
    with pytest.raises(QueryEncoderError, match=f"{tmp_path}.*manifest.json is missing"):
        QueryEncoder.load(tmp_path)


def test_loading_an_export_of_another_format_says_to_export_again(exported, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy, copy_function=os.link)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").unlink()
    (copy / "manifest.json").write_text(json.dumps({**manifest, "format": 99}))
    with pytest.raises(QueryEncoderError, match="format 99.*export the model again"):
        QueryEncoder.load(copy)


def test_loading_an_export_with_truncated_weights_names_the_file(exported, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy, copy_function=os.link)
    (copy / "model.onnx.data").unlink()
    (copy / "model.onnx.data").write_bytes((exported / "model.onnx.data").read_bytes()[:1000])
    with pytest.raises(QueryEncoderError, match="wrong size: model.onnx.data"):
        QueryEncoder.load(copy)


def test_a_directory_that_is_no_model_is_refused_with_the_reason(tmp_path):
    not_a_model = tmp_path / "notes"
    not_a_model.mkdir()
    (not_a_model / "README.md").write_text("Just notes.")
    with pytest.raises(ExportError, match="could not be loaded"):
        export_query_model(not_a_model, tmp_path / "export")
    # no export, no staging folder left; the lock of the export's turn stays, as stores' do
    assert sorted(path.name for path in tmp_path.iterdir()) == [".export.lock", "notes"]


def test_a_query_prompt_left_out_of_the_pooling_is_refused(tmp_path):
    source = resolve_model_dir(MODEL)
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    model_dir = model_copy(tmp_path / "model", {
        "1_Pooling/config.json": json.dumps({**pooling, "include_prompt": False}),
        "config_sentence_transformers.json": json.dumps({"prompts": {"query": "query: "}}),
    })
    with pytest.raises(ExportError, match="leaves its query prompt out of the pooling"):
        export_query_model(model_dir, tmp_path / "export")
