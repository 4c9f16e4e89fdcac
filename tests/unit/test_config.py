"""Configuration: sources by name, one data directory, clear errors for bad input."""

import pytest
import yaml

from jarvis_core.config import ConfigError, load_config
from tests.pipeline_helpers import PROJECT_ROOT, write_config


def test_shorthand_and_full_vault_forms(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config = write_config(tmp_path, {"a": tmp_path / "a"})
    assert config.sources["a"].path == (tmp_path / "a").resolve()
    assert config.data_dir == (tmp_path / "data").resolve()

    path = tmp_path / "full.yaml"
    path.write_text("vaults:\n  one: a\n  two:\n    path: b\n    exclude: ['drafts/**']\n")
    config = load_config(path)
    assert config.source_names == ["one", "two"]
    assert config.sources["two"].exclude == ("drafts/**",)
    assert config.data_dir == (tmp_path / ".jarvis").resolve()


def test_jarvis_home_overrides_data_dir(tmp_path, monkeypatch):
    (tmp_path / "v").mkdir()
    monkeypatch.setenv("JARVIS_HOME", str(tmp_path / "elsewhere"))
    config = write_config(tmp_path, {"v": tmp_path / "v"})
    assert config.data_dir == (tmp_path / "elsewhere").resolve()
    assert config.duckdb_path.parent == config.data_dir


def test_config_found_through_environment(tmp_path, monkeypatch):
    (tmp_path / "v").mkdir()
    write_config(tmp_path, {"v": tmp_path / "v"})
    monkeypatch.setenv("JARVIS_CONFIG", str(tmp_path / "jarvis.yaml"))
    assert load_config().source_names == ["v"]


@pytest.mark.parametrize("text, message", [
    ("vaults:\n  notes: jarvis.yaml\n", "vaults.notes.path: Value error, vault path is not a"),
    ("vaults:\n  'bad name!': .\n", "source name 'bad name!'"),
    ("vaults: [a, b]\n", "'vaults' must be a mapping"),
    ("vaults:\n  v: .\nunknown_key: 1\n", "unknown_key"),
    ("vaults:\n  v: .\nchunking:\n  overlap_tokens: -1\n", "chunking.overlap_tokens"),
    ("resources:\n  max_memory_mb: 100\n", "resources.max_memory_mb: Input should be "
     "greater than or equal to 256"),
    ("resources:\n  max_memory_mb: lots\n", "resources.max_memory_mb: Input should be a "
     "valid integer"),
    ("vaults: {v: .\n", "not valid YAML"),
    ("- just\n- a list\n", "top level must be a mapping"),
])
def test_bad_configuration_names_file_and_field(tmp_path, text, message):
    path = tmp_path / "jarvis.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(path) in str(error.value)
    assert message in str(error.value)


def test_vault_path_that_is_a_file(tmp_path):
    (tmp_path / "file.md").write_text("x")
    path = tmp_path / "jarvis.yaml"
    path.write_text("vaults:\n  v: file.md\n")
    with pytest.raises(ConfigError, match="not a directory"):
        load_config(path)


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "nope.yaml")


def test_shipped_configuration_is_valid():
    config = load_config(PROJECT_ROOT / "jarvis.yaml")
    assert "sample" in config.sources_of("vault")


def test_the_memory_budget_never_reruns_a_source(tmp_path):
    """It shapes how the layers compute, not what they hold: a changed budget leaves the
    settings fingerprint a published version is compared with as it was."""
    from jarvis_core.pending import settings_fingerprint

    (tmp_path / "v").mkdir()
    small = write_config(tmp_path / "a", {"v": tmp_path / "v"}, data_dir=str(tmp_path / "d"),
                         resources={"max_memory_mb": 512})
    large = write_config(tmp_path / "b", {"v": tmp_path / "v"}, data_dir=str(tmp_path / "d"))
    assert small.resources.max_memory_mb != large.resources.max_memory_mb
    assert settings_fingerprint(small) == settings_fingerprint(large)


def test_a_source_reruns_when_its_own_or_the_shared_settings_move_not_another_s(tmp_path):
    """Each published version keeps a fingerprint per source: adding a source, changing
    another's settings, what only the query side reads (profiles, memory, audit) or where
    the source is (its content is compared instead) leaves a source's as it was; its own
    settings and the layers' shared ones do not."""
    from jarvis_core.pending import source_fingerprints

    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    one = source_fingerprints(write_config(tmp_path / "one", {"a": tmp_path / "a"}))
    two = source_fingerprints(write_config(
        tmp_path / "two", {"a": tmp_path / "a", "b": tmp_path / "b"},
        profiles={"reader": ["b"]}, memory={"vault": "b"}, audit={"retention_days": 400}))
    assert two["a"] == one["a"] and set(two) == {"a", "b"}
    moved = source_fingerprints(write_config(tmp_path / "moved", {"a": tmp_path / "c",
                                                                   "b": tmp_path / "b"}))
    assert moved == two
    remotes = [source_fingerprints(write_config(tmp_path / f"remote-{n}", {}, repos={
        "r": {"url": f"https://git.example/{n}/r.git"}}))["r"] for n in ("one", "two")]
    assert remotes[0] == remotes[1]
    excluding = tmp_path / "excluding" / "jarvis.yaml"
    excluding.parent.mkdir()
    excluding.write_text(yaml.safe_dump({"vaults": {"a": {
        "path": str(tmp_path / "a"), "exclude": ["drafts/**"]}}}))
    assert source_fingerprints(load_config(excluding))["a"] != one["a"]
    chunked = source_fingerprints(write_config(tmp_path / "chunked", {"a": tmp_path / "a"},
                                               chunking={"max_tokens": 128}))
    assert chunked["a"] != one["a"]


def test_a_refresh_of_some_sources_records_the_earlier_fingerprints_of_the_others(tmp_path):
    from jarvis_core.pending import published_fingerprints, source_fingerprints

    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    config = write_config(tmp_path / "p", {name: tmp_path / name for name in ("a", "b", "c")})
    current = source_fingerprints(config)
    previous = {"a": "earlier-a", "b": "earlier-b"}
    assert published_fingerprints(config, None, previous) == current  # every source ran
    assert published_fingerprints(config, ["a"], previous) == {"a": current["a"],
                                                               "b": "earlier-b"}
    # before fingerprints per source: the others are left to run
    assert published_fingerprints(config, ["c"], "one-string") == {"c": current["c"]}
