"""Profiles: named lists of sources checked against the configuration, and what a profile
does to a configuration and to search filters."""

from pathlib import Path

import pytest

from jarvis_core.config import ConfigError, config_from_mapping
from jarvis_core.profiles import UnknownProfile, resolve_profile
from jarvis_core.stores.vectors.filters import VectorFilter


def configuration(tmp_path: Path, **settings):
    for name in ("notes", "memory"):
        (tmp_path / name).mkdir(exist_ok=True)
    return config_from_mapping({"vaults": {"notes": "notes", "memory": "memory"},
                                "tickets": {"jira": "jira"}, **settings}, base_dir=tmp_path)


def test_a_profile_narrows_the_configuration_and_the_filters(tmp_path):
    config = configuration(tmp_path, profiles={"personal": ["notes", "memory"]},
                           memory={"vault": "memory"})
    profile = resolve_profile(config, "personal")
    assert profile.restricted and profile.sources == {"notes", "memory"}
    scoped = profile.configuration(config)
    assert scoped.source_names == ["memory", "notes"] and scoped.sources_of("tickets") == {}
    assert scoped.memory.vault == "memory" and scoped.data_dir == config.data_dir
    assert profile.restrict(None) == VectorFilter(sources=["memory", "notes"])
    assert profile.restrict(VectorFilter(sources=["jira"], tags_any=["x"])) == VectorFilter(
        sources=[], tags_any=["x"])  # an empty list matches nothing
    assert profile.restrict_sources(["notes", "jira"]) == ["notes"]


def test_all_sees_every_source_unchanged(tmp_path):
    config = configuration(tmp_path)
    for name in (None, "all"):
        profile = resolve_profile(config, name)
        assert not profile.restricted and profile.configuration(config) is config
        assert profile.restrict(None) is None
    with pytest.raises(UnknownProfile, match=r"unknown profile 'work' \(configured: all\)"):
        resolve_profile(config, "work")


@pytest.mark.parametrize("settings, message", [
    ({"profiles": {"work": ["jira", "confluence"]}},
     r"profiles.work: unknown source\(s\) confluence"),
    ({"profiles": {"all": ["notes"]}}, "'all' is reserved"),
    ({"memory": {"vault": "jira"}}, "memory.vault: 'jira' is not a configured vault"),
    ({"memory": {"folder": "Memories", "archive_folder": "Memories/"}},
     "archive_folder must differ"),
    ({"memory": {"folder": ".hidden"}}, "memory.folder: .*vault-relative folder"),
    ({"memory": {"decay_after_days": 400}}, "audit.retention_days must be at least"),
    ({"audit": {"redact_patterns": ["(unclosed"]}}, "is not a regular expression"),
])
def test_bad_assistant_settings_name_the_field(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message):
        configuration(tmp_path, **settings)
