"""``jarvis bench parallel``'s set-up, without running it (tests/dagster/test_parallel_sources.py
runs sources side by side)."""

from jarvis_bench.parallel import MODES, _env, _shared_cache
from jarvis_core.settings import CACHE_ENV


def test_warm_modes_read_the_cache_the_warm_up_filled(tmp_path, monkeypatch):
    """Each mode's data directory has a cache of its own: ``--warm`` must point both modes
    at the one the warm-up refresh filled, else they compute every vector again."""
    monkeypatch.delenv(CACHE_ENV, raising=False)
    filled = str(_shared_cache(tmp_path / "warm-up"))
    for name, _ in MODES:
        assert _env(tmp_path / name, tmp_path / "home", warm=True)[CACHE_ENV] == filled
        assert CACHE_ENV not in _env(tmp_path / name, tmp_path / "home", warm=False)
