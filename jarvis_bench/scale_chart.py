"""The chart of ``jarvis bench scale`` (SVG): cost against corpus size in two panels, times
above (first refresh, first searchable, one-note edit, no-op) and peak RSS below (first
refresh, no-op, queries), one marked line per measure, each panel with labelled axes and
ticks. An axis is logarithmic when its values span a factor of ``LOG_SPAN`` or more (sizes
of 10k to 1M chunks, no-op seconds beside first-refresh minutes), else linear from zero."""

from __future__ import annotations

import math
from html import escape

LOG_SPAN = 20
MAX_LOG_TICKS = 9
WIDTH, PANEL_HEIGHT, TITLE_HEIGHT = 720, 300, 40
LEFT, RIGHT, TOP, BOTTOM = 80, 190, 25, 50
COLOURS = ("#c0392b", "#2c7fb8", "#27ae60", "#8e44ad")
TIME_SERIES = (("wall_seconds", "first refresh, complete"),
               ("first_searchable_seconds", "first refresh, searchable"),
               ("note_edit_seconds", "one note edited"),
               ("noop_seconds", "no-op refresh"))
MEMORY_SERIES = (("peak_rss_mb", "first refresh"), ("noop_peak_rss_mb", "no-op refresh"),
                 ("query_peak_rss_mb", "warm queries"))


class Axis:
    """Values to pixels between ``low`` and ``high`` (pixels), with round ticks: 1, 2 and 5
    times powers of ten on a log axis, at most five round steps on a linear one from zero."""

    def __init__(self, values: list[float], low: float, high: float) -> None:
        positive = [value for value in values if value > 0] or [1.0]
        self.log = max(positive) / min(positive) >= LOG_SPAN
        if self.log:
            self.start = _round(min(positive), above=False)
            self.end = _round(max(positive), above=True)
        else:  # steps of 1, 2, 2.5 or 5 times a power of ten, at most five to the top
            fifth = max(positive) / 5
            power = math.floor(math.log10(fifth))
            self.step = next(factor * 10.0 ** exponent for exponent in (power, power + 1)
                             for factor in (1, 2, 2.5, 5)
                             if factor * 10.0 ** exponent >= fifth * (1 - 1e-9))
            self.start, self.end = 0.0, self.step * math.ceil(max(positive) / self.step - 1e-9)
        self.low, self.high = low, high

    def __call__(self, value: float) -> float:
        if self.log:
            share = (math.log10(max(value, self.start)) - math.log10(self.start)) / (
                math.log10(self.end) - math.log10(self.start))
        else:
            share = value / self.end
        return self.low + (self.high - self.low) * share

    def ticks(self) -> list[float]:
        if self.log:
            ticks = [value for value in _round_values(self.start, self.end)
                     if self.start <= value <= self.end]
            if len(ticks) > MAX_LOG_TICKS:  # many decades: the ends and the powers of ten
                ticks = [value for value in ticks if value in (self.start, self.end)
                         or f"{value:g}".lstrip("0.").startswith("1")]
            return ticks
        return [self.step * index for index in range(round(self.end / self.step) + 1)]


def _round_values(low: float, high: float) -> list[float]:
    """1, 2 and 5 times the powers of ten from below ``low`` to above ``high``."""
    powers = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    return [factor * 10.0 ** power for power in powers for factor in (1, 2, 5)]


def _round(value: float, *, above: bool) -> float:
    """The nearest 1, 2 or 5 times a power of ten at or above (else at or below) ``value``."""
    candidates = _round_values(value, value)
    if above:
        return min(candidate for candidate in candidates if candidate >= value * (1 - 1e-9))
    return max(candidate for candidate in candidates if candidate <= value * (1 + 1e-9))


def tick_label(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _scale_note(axis: Axis) -> str:
    return " (log scale)" if axis.log else ""


def _panel(rows: list[dict], series, top: float, y_title: str, x_title: str) -> list[str]:
    drawn = [(field, label) for field, label in series
             if any(row.get(field) is not None for row in rows)]
    left, right, bottom = LEFT, WIDTH - RIGHT, top + PANEL_HEIGHT - BOTTOM
    x = Axis([row["chunks"] for row in rows], left, right)
    y = Axis([row[field] for row in rows for field, _ in drawn if row.get(field) is not None],
             bottom, top + TOP)
    parts = [f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
             f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{top + TOP}" stroke="#333"/>']
    for tick in x.ticks():
        at = x(tick)
        parts += [f'<line x1="{at:.1f}" y1="{bottom}" x2="{at:.1f}" y2="{bottom + 5}" '
                  'stroke="#333"/>',
                  f'<text x="{at:.1f}" y="{bottom + 18}" font-size="11" text-anchor="middle">'
                  f'{tick_label(tick)}</text>']
    for tick in y.ticks():
        at = y(tick)
        parts += [f'<line x1="{left}" y1="{at:.1f}" x2="{right}" y2="{at:.1f}" stroke="#ddd"/>',
                  f'<text x="{left - 6}" y="{at + 4:.1f}" font-size="11" text-anchor="end">'
                  f'{tick_label(tick)}</text>']
    parts += [f'<text x="{(left + right) / 2}" y="{bottom + 38}" font-size="12" '
              f'text-anchor="middle">{escape(x_title)}{_scale_note(x)}</text>',
              f'<text x="18" y="{(top + TOP + bottom) / 2}" font-size="12" text-anchor="middle" '
              f'transform="rotate(-90 18 {(top + TOP + bottom) / 2})">'
              f'{escape(y_title)}{_scale_note(y)}</text>']
    for number, (field, label) in enumerate(drawn):
        colour = COLOURS[number % len(COLOURS)]
        points = [(x(row["chunks"]), y(row[field])) for row in rows if row.get(field) is not None]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                     + " ".join(f"{px:.1f},{py:.1f}" for px, py in points) + '"/>')
        parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{colour}"/>'
                  for px, py in points]
        legend_y = top + TOP + 10 + 18 * number
        parts += [f'<line x1="{right + 15}" y1="{legend_y}" x2="{right + 35}" y2="{legend_y}" '
                  f'stroke="{colour}" stroke-width="2"/>',
                  f'<text x="{right + 40}" y="{legend_y + 4}" font-size="11">{escape(label)}'
                  '</text>']
    return parts


def chart_svg(rows: list[dict], embedder: str) -> str:
    """The chart of the rows (one per size, each with ``chunks`` and the measures)."""
    height = TITLE_HEIGHT + 2 * PANEL_HEIGHT
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'font-family="sans-serif"><rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="{LEFT}" y="18" font-size="14">jarvis bench scale: cost against corpus '
             'size</text>',
             f'<text x="{LEFT}" y="34" font-size="11">embedder: {escape(embedder)}</text>']
    parts += _panel(rows, TIME_SERIES, TITLE_HEIGHT, "wall seconds", "chunks published")
    parts += _panel(rows, MEMORY_SERIES, TITLE_HEIGHT + PANEL_HEIGHT, "peak RSS (MB)",
                    "chunks published")
    parts.append("</svg>")
    return "\n".join(parts)
