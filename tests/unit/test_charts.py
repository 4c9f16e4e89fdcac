"""Analytics charts are drawn once per content: a refresh whose graph did not change reads
its pictures back instead of drawing them again."""

from datetime import UTC, datetime
from xml.etree import ElementTree

from jarvis_core.analytics import charts
from jarvis_core.analytics.history import AnalyticsSnapshot


def snapshot(sizes=(5, 3)) -> AnalyticsSnapshot:
    communities = [{"id": i, "label": f"topic {i}", "size": size} for i, size in enumerate(sizes)]
    return AnalyticsSnapshot(
        source="notes", snapshot_id="s1", generated_at=datetime(2026, 11, 1, tzinfo=UTC),
        content_hash="h", notes=[], compute_seconds=0.1,
        figures={"communities": communities, "degree_distribution": {"0": 2, "1": 6}})


def point(day: int, notes: int) -> dict:
    return {"generated_at": datetime(2026, 11, day, tzinfo=UTC), "notes": notes, "links": 4,
            "orphans": 1, "dead_ends": 0, "broken_links": 2, "stale_notes": 0}


def test_charts_are_svgs_read_back_while_their_data_is_unchanged(tmp_path, monkeypatch):
    (tmp_path / "community_sizes.png").write_bytes(b"\x89PNG drawn by an older Jarvis")
    drawn, error = charts.draw_charts(snapshot(), [], tmp_path)
    assert error is None and sorted(drawn) == ["community_sizes", "degree_distribution"]
    for name, svg in drawn.items():
        root = ElementTree.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("width") == "720"
        assert b"jarvis-chart " in svg and b"<script xlink:href" not in svg  # nothing fetched
        assert (tmp_path / f"{name}.svg").read_bytes() == svg
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "community_sizes.svg", "degree_distribution.svg"]
    monkeypatch.setattr(charts, "render_chart", lambda name, *_: _never_drawn(name))
    again, error = charts.draw_charts(snapshot(), [], tmp_path)
    assert error is None and again == drawn


def _never_drawn(name):
    raise AssertionError(f"{name} was drawn again from unchanged data")


def test_only_the_charts_whose_data_changed_are_drawn_again(tmp_path, monkeypatch):
    drawn = []

    def fake(name, data, signature):
        drawn.append(name)
        return b"<svg>" + signature.encode()

    monkeypatch.setattr(charts, "render_chart", fake)
    charts.draw_charts(snapshot(), [point(1, 10), point(2, 10)], tmp_path)
    assert sorted(drawn) == ["community_sizes", "degree_distribution", "trend"]
    drawn.clear()
    charts.draw_charts(snapshot(sizes=(4, 4)), [point(1, 10), point(2, 10)], tmp_path)
    assert drawn == ["community_sizes"]
    drawn.clear()
    charts.draw_charts(snapshot(sizes=(4, 4)), [point(1, 10), point(2, 10), point(3, 11)],
                       tmp_path)
    assert drawn == ["trend"]
    drawn.clear()
    (tmp_path / "degree_distribution.svg").write_bytes(b"<svg>edited by hand</svg>")
    charts.draw_charts(snapshot(sizes=(4, 4)), [point(1, 10), point(2, 10), point(3, 11)],
                       tmp_path)
    assert drawn == ["degree_distribution"]


def test_every_chart_draws_from_real_shapes_of_data(tmp_path):
    """The trend (two axes, dates) and a hub-heavy degree distribution (log-log) draw too."""
    hubs = {str(degree): 5000 // (degree + 1) ** 2 + 1 for degree in range(0, 300, 3)}
    wide = AnalyticsSnapshot(**{**vars(snapshot()), "figures": {
        "communities": [], "degree_distribution": hubs}})
    drawn, error = charts.draw_charts(wide, [point(1, 10), point(2, 12), point(3, 11)],
                                      tmp_path)
    assert error is None and sorted(drawn) == ["community_sizes", "degree_distribution", "trend"]
    for svg in drawn.values():
        ElementTree.fromstring(svg)  # well-formed
    assert b"2026-11-02" in drawn["trend"] and b"broken_links" in drawn["trend"]
    assert b"(log)" in drawn["degree_distribution"]


def test_a_chart_that_cannot_be_written_costs_only_the_pictures(tmp_path):
    blocked = tmp_path / "charts"
    blocked.write_text("a file where the folder should be")
    drawn, error = charts.draw_charts(snapshot(), [], blocked)
    assert drawn == {} and error.startswith(("FileExistsError", "NotADirectoryError"))
