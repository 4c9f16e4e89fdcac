"""Argument checks of the query API: the messages the CLI, the MCP tools and the README
share, the filter both search legs apply, and messages in terms of a front end's flags."""

from datetime import UTC, datetime

import pytest

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.tickets.settings import TicketsConfig
from jarvis_core.sources.vault.settings import VaultConfig
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.validation import (
    QueryError,
    check_alpha,
    check_depth,
    check_max_tokens,
    check_search,
    check_similarity_threshold,
    check_vault,
    date_bound,
    require_text,
    search_filter,
)


@pytest.fixture
def config(tmp_path) -> JarvisConfig:
    (tmp_path / "notes").mkdir()
    (tmp_path / "tickets.json").write_text("[]")
    return JarvisConfig(data_dir=tmp_path / "data",
                        sources={"notes": VaultConfig(path=tmp_path / "notes"),
                                 "issues": TicketsConfig(path=tmp_path / "tickets.json")})


def test_filter_arguments():
    assert search_filter() is None
    filters = search_filter("work", "note", ["#health", "sleep"], "2026-01-01", "2026-01-31")
    assert filters == VectorFilter(sources=["work"], source_types=["note"],
                                   tags_any=["health", "sleep"],
                                   modified_from=datetime(2026, 1, 1),
                                   modified_to=datetime(2026, 1, 31, 23, 59, 59, 999999))
    assert search_filter(modified_before="2026-01-31T12:00:00").modified_to == \
        datetime(2026, 1, 31, 12)
    for kwargs, message in [
            ({"modified_after": "yesterday"}, "modified_after must be an ISO date"),
            ({"modified_after": "2026-02-01", "modified_before": "2026-01-01"},
             "modified_after must not be later than modified_before"),
            ({"tags": [""]}, "tags must be a list of non-empty strings"),
            ({"source_types": [3]}, "source_types must be a list of non-empty strings")]:
        with pytest.raises(QueryError, match=message):
            search_filter(**kwargs)


def test_date_bounds_compare_in_utc():
    aware = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert date_bound(aware, "modified_after", end_of_day=False) is aware
    with pytest.raises(QueryError, match="must not be later"):
        search_filter(modified_after="2026-01-02T00:00:00+00:00", modified_before="2026-01-01")
    with pytest.raises(QueryError, match="modified_before must be an ISO date or date-time, "
                                         "got '3'"):
        date_bound(3, "modified_before", end_of_day=True)


def test_every_search_checks_query_limit_and_source(config):
    check_search(config, "sleep", 50, "issues")  # any configured source, not only vaults
    for args, message in [((" ", 10, None), "query parameter is required"),
                          ((None, 10, None), "query parameter is required"),
                          (("x", 0, None), "limit must be between 1 and 50"),
                          (("x", 51, None), "limit must be between 1 and 50"),
                          (("x", True, None), "limit must be between 1 and 50"),
                          (("x", 10, "nope"), "Unknown vault 'nope'")]:
        with pytest.raises(QueryError, match=message):
            check_search(config, *args)
    with pytest.raises(QueryError, match="Unknown vault 'issues'"):
        check_vault(config, "issues")  # notes are read from vaults only


@pytest.mark.parametrize(("check", "bad", "message"), [
    (check_depth, [0, 4, True, 1.0], "depth must be between 1 and 3"),
    (check_alpha, [-0.1, 1.5, True, "0.5"], "alpha must be between 0 and 1"),
    (check_similarity_threshold, [-1.5, 2, False], "similarity_threshold must be between -1 and 1"),
    (check_max_tokens, [10, 100_001, 6500.0], "max_tokens must be between 200 and 100000"),
])
def test_range_checks(check, bad, message):
    for value in bad:
        with pytest.raises(QueryError, match=message):
            check(value)


def test_good_values_pass():
    check_depth(3)
    check_alpha(None)
    check_alpha(0)
    check_similarity_threshold(-1)
    check_max_tokens(200)
    assert require_text("Alerting", "query_note_path") == "Alerting"


def test_messages_can_name_a_front_ends_flags():
    with pytest.raises(QueryError) as raised:
        search_filter(modified_after="2026-02-01", modified_before="2026-01-01")
    flags = {"modified_after": "--after", "modified_before": "--before"}
    assert raised.value.naming(flags) == "--after must not be later than --before"
    with pytest.raises(QueryError) as raised:
        require_text("", "query")
    # a parameter the front end does not rename, and words that merely contain it, stay
    assert raised.value.naming(flags) == "query parameter is required"
    assert QueryError("limits of limit", "limit").naming({"limit": "--limit"}) == \
        "limits of --limit"
