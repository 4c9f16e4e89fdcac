"""What a materialization shows in the Dagster UI: markdown tables, timings, failures."""

from collections.abc import Iterable, Sequence

import dagster as dg

_PREVIEW_ROWS = 10
_CELL_CHARS = 80


def _cell(value: object) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def markdown_table(rows: Iterable[dict], columns: Sequence[str],
                   limit: int = _PREVIEW_ROWS) -> dg.MetadataValue:
    """The first ``limit`` rows as a markdown table (or a note that there are none)."""
    lines = [f"| {' | '.join(columns)} |", f"|{'---|' * len(columns)}"]
    for count, row in enumerate(rows):
        if count == limit:
            lines.append(f"| … |{' |' * (len(columns) - 1)}")
            break
        lines.append(f"| {' | '.join(_cell(row.get(col, '')) for col in columns)} |")
    return dg.MetadataValue.md("\n".join(lines) if len(lines) > 2 else "_none_")


def counts_table(counts: dict[str, int]) -> dg.MetadataValue:
    return markdown_table([{"what": key, "count": value} for key, value in counts.items()],
                          ["what", "count"], limit=len(counts))


def failures_table(failures: list[dict]) -> dg.MetadataValue:
    return markdown_table(failures, ["path", "reason"], limit=50)


def log_failures(context: dg.AssetExecutionContext, source: str, failures: list[dict]) -> None:
    for failure in failures:
        context.log.warning(f"{source}/{failure['path']}: not ingested: {failure['reason']}")
