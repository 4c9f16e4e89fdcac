"""Build the sample repository "lumen" and write it as a git bundle.

Every commit has a fixed author, committer and date, so the hashes are the same on every
machine and every run (the vault's notes cite two of them). Three people commit under
name and email variants (folded into one person each by jarvis_core/sources/people.py); messages
cite Jira keys (LUM-1, [LUM-4]), a merged branch feature/LUM-6-alert-rules and GitHub
issues (fixes #7, fixes #15).

    python scripts/make_sample_repo.py [--out sample_data/repos/lumen.bundle] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "sample_data" / "repos" / "lumen.bundle"

MAYA = ("Maya Chen", "maya.chen@lumen.example")
MAYA_LOWER = ("maya.chen", "maya.chen@lumen.example")
SAM = ("Sam Novak", "sam.novak@lumen.example")
SAM_COMMA = ("Novak, Sam", "Sam.Novak@lumen.example")
PRIYA = ("Priya Raman", "priya.raman@lumen.example")
PRIYA_GITHUB = ("Priya Raman", "41234+priyaraman@users.noreply.github.com")


def _text(body: str) -> str:
    return textwrap.dedent(body).lstrip("\n")


README = _text("""
    # Lumen

    Lumen collects readings from home weather stations, stores them as time series,
    raises alerts (frost, gusts, heavy rain, silent stations) and draws a dashboard per
    station.

    ## Layout

    - `src/lumen/ingest/` — the HTTPS ingest API stations post to, with API-key auth and
      the dedupe key that makes retries idempotent.
    - `src/lumen/storage/` — the TimescaleDB hypertable and continuous aggregates.
    - `src/lumen/alerting/` — the alert rule engine, evaluated every minute.
    - `src/lumen/query/` — the read API with downsampling.
    - `dashboard/` — the SvelteKit front end.
    - `docs/` — architecture notes and runbooks.

    ## Running locally

    `make dev` starts TimescaleDB in Docker and the API on port 8080.
""")

API_V1 = _text('''
    """Ingest API: stations POST one reading per request."""

    from fastapi import FastAPI

    app = FastAPI(title="lumen-ingest")


    @app.post("/v1/readings")
    async def post_reading(reading: dict) -> dict:
        return {"accepted": 1}
''')

API_V2 = API_V1.replace(
    'async def post_reading(reading: dict) -> dict:\n    return {"accepted": 1}',
    "async def post_reading(reading: dict, station=Depends(station_from_key)) -> dict:\n"
    '    return {"accepted": 1, "station": station.id}').replace(
    "from fastapi import FastAPI", "from fastapi import Depends, FastAPI\n\n"
    "from lumen.auth import station_from_key")

API_V3 = API_V2.replace(
    '    return {"accepted": 1, "station": station.id}',
    '    key = dedupe_key(station.id, reading["boot_id"], reading["seq"])\n'
    "    if await seen(key):\n"
    '        return {"accepted": 0, "duplicate": True}\n'
    '    return {"accepted": 1, "station": station.id}').replace(
    "from lumen.auth import station_from_key",
    "from lumen.auth import station_from_key\nfrom lumen.ingest.dedupe import dedupe_key, seen")

API_V4 = API_V3.replace(
    "    key = dedupe_key(",
    '    reading["ts"] = clamp_future(reading["ts"], max_skew_seconds=300)\n'
    "    key = dedupe_key(").replace(
    "from lumen.ingest.dedupe import dedupe_key, seen",
    "from lumen.ingest.clock import clamp_future\nfrom lumen.ingest.dedupe import dedupe_key, seen")

CLOCK = _text('''
    """Stations with drifting clocks send readings from the future (lumen#7)."""

    from datetime import UTC, datetime, timedelta


    def clamp_future(ts: datetime, max_skew_seconds: int) -> datetime:
        """A timestamp more than max_skew_seconds ahead of the server becomes server time."""
        now = datetime.now(UTC)
        return now if ts - now > timedelta(seconds=max_skew_seconds) else ts
''')

AUTH = _text('''
    """Per-station API keys: each station has exactly one key, stored hashed."""

    import hashlib

    from fastapi import Header, HTTPException


    async def station_from_key(x_api_key: str = Header(...)):
        digest = hashlib.sha256(x_api_key.encode()).hexdigest()
        station = await lookup_station(digest)
        if station is None:
            raise HTTPException(status_code=401, detail="unknown API key")
        return station
''')

DEDUPE = _text('''
    """Idempotent ingest: a reading is identified by (station_id, boot_id, seq)."""


    def dedupe_key(station_id: str, boot_id: str, seq: int) -> str:
        return f"{station_id}:{boot_id}:{seq}"


    async def seen(key: str) -> bool:
        """True when the key was stored before (a retried POST)."""
        return await redis.set(key, 1, nx=True, ex=86400) is None
''')

SCHEMA_V1 = _text("""
    -- Raw readings, one row per station and instant.
    CREATE TABLE readings (
        station_id  TEXT        NOT NULL,
        ts          TIMESTAMPTZ NOT NULL,
        temperature REAL,
        humidity    REAL,
        pressure    REAL,
        wind        REAL,
        rain_tips   INTEGER
    );
    SELECT create_hypertable('readings', 'ts', chunk_time_interval => INTERVAL '1 day');
""")

SCHEMA_V2 = SCHEMA_V1.replace("    station_id  TEXT        NOT NULL,\n",
                              "    station_id  TEXT        NOT NULL,\n"
                              "    boot_id     TEXT        NOT NULL,\n"
                              "    seq         BIGINT      NOT NULL,\n") + _text("""
    CREATE UNIQUE INDEX readings_dedupe ON readings (station_id, boot_id, seq, ts);
""")

ARCHITECTURE = _text("""
    # Architecture

    Stations post readings to the ingest API, which authenticates the station by its API
    key, drops duplicates by the dedupe key and writes to the `readings` hypertable in
    TimescaleDB. Continuous aggregates roll readings up per minute, hour and day; the query
    service reads them and downsamples to the width of the chart. The alert rule engine
    evaluates its rules every minute over the last readings of each station.
""")

RULES_V1 = _text('''
    """Alert rules evaluated every minute per station."""

    RULES = {
        "frost": lambda r: r["temperature"] is not None and r["temperature"] <= 0.5,
        "gust": lambda r: r["wind"] is not None and r["wind"] >= 20.0,
        "heavy_rain": lambda r: r["rain_tips"] is not None and r["rain_tips"] * 0.2 >= 8.0,
    }


    def evaluate(reading: dict) -> list[str]:
        return [name for name, rule in RULES.items() if rule(reading)]
''')

RULES_V2 = RULES_V1 + _text('''


    def evaluate_once(reading: dict, fired: set[str]) -> list[str]:
        """Rules that fire for a reading whose dedupe key was not seen: a retried reading
        must not raise the same alert twice."""
        key = reading["dedupe_key"]
        new = [name for name in evaluate(reading) if (key, name) not in fired]
        fired.update((key, name) for name in new)
        return new
''')

RULES_V3 = RULES_V2 + _text('''


    def stream_lag_alarm(oldest_pending_seconds: float, threshold_seconds: float = 120) -> bool:
        """The backlog alarm: the oldest unprocessed ingest entry is older than the threshold."""
        return oldest_pending_seconds > threshold_seconds
''')

ALERTING_DOC = _text("""
    # Alerting

    The rule engine evaluates frost, gust and heavy-rain rules every minute for every
    station. Duplicate readings (a station retrying a POST) must not fire an alert twice,
    so rules run once per dedupe key. Notifications go out by e-mail and push.
""")

OVERVIEW_V1 = _text("""
    <script lang="ts">
      export let station;
      export let readings = [];
    </script>

    <h1>{station.name}</h1>
    <LineChart points={readings.map((r) => [r.ts, r.temperature])} />
""")

OVERVIEW_V2 = OVERVIEW_V1.replace(
    "<LineChart points={readings.map((r) => [r.ts, r.temperature])} />",
    "<!-- a gap longer than three intervals is an offline period, not a straight line -->\n"
    "<LineChart points={withGaps(readings, 180)} />")

DOWNSAMPLE = _text('''
    """Query service: never send more points than the chart has pixels."""


    def downsample(points: list[tuple], width: int) -> list[tuple]:
        """Largest-triangle-three-buckets would be nicer; min/max per bucket is enough."""
        if len(points) <= width:
            return points
        size = len(points) / width
        buckets = [points[int(i * size):int((i + 1) * size)] for i in range(width)]
        return [min(b, key=lambda p: p[1]) for b in buckets if b]
''')

RUNBOOK = _text("""
    # Ingest backlog runbook

    When the stream-lag alarm fires, the oldest unprocessed reading is more than two
    minutes old.

    1. Check the ingest workers are running and not crash-looping.
    2. Scale the workers out; the stream absorbs bursts but not a stopped consumer.
    3. If TimescaleDB is the bottleneck, pause the continuous aggregate refresh.
""")

COMPONENTS = _text("""
    # Lumen's components and how they depend on each other (read by Jarvis).
    components:
      - name: ingest-api
        description: HTTPS endpoint stations post readings to; auth, dedupe, batching.
        owners: [maya.chen@lumen.example]
        paths: [src/lumen/ingest/, src/lumen/auth.py]
        depends_on: [timescaledb]
      - name: timescaledb
        description: Hypertable of raw readings plus continuous aggregates.
        owners: [sam.novak@lumen.example]
        paths: [src/lumen/storage/]
      - name: alerting
        description: Rule engine evaluated every minute; frost, gust, heavy rain, stream lag.
        owners: [maya.chen@lumen.example]
        paths: [src/lumen/alerting/]
        depends_on: [timescaledb, ingest-api]
      - name: query-service
        description: Read API over the aggregates with downsampling.
        owners: [sam.novak@lumen.example]
        paths: [src/lumen/query/]
        depends_on: [timescaledb]
      - name: dashboard
        description: SvelteKit front end with a page per station.
        owners: [priya.raman@lumen.example]
        paths: [dashboard/]
        depends_on: [query-service]
""")

# (branch, author, date, message, {path: content}); branch None is main.
COMMITS = [
    (None, MAYA, "2026-10-01T09:00:00+02:00",
     "Initial commit: README and project layout\n",
     {"README.md": README, ".gitignore": "__pycache__/\n.venv/\n"}),
    (None, MAYA, "2026-10-03T10:30:00+02:00",
     "LUM-1: ingest API skeleton\n\nOne POST endpoint that accepts a reading and does "
     "nothing else yet.\n",
     {"src/lumen/ingest/api.py": API_V1}),
    (None, SAM_COMMA, "2026-10-05T14:10:00+02:00",
     "[LUM-2] Hypertable schema for raw readings\n\nDaily chunks; compression and retention "
     "come with LUM-5.\n",
     {"src/lumen/storage/schema.sql": SCHEMA_V1, "docs/architecture.md": ARCHITECTURE}),
    (None, MAYA_LOWER, "2026-10-08T11:45:00+02:00",
     "LUM-3: per-station API keys\n\nKeys are stored as SHA-256 digests; a request with an "
     "unknown key gets 401.\n",
     {"src/lumen/auth.py": AUTH, "src/lumen/ingest/api.py": API_V2}),
    (None, SAM, "2026-10-12T16:20:00+02:00",
     "[LUM-4] Dedupe key (station_id, boot_id, seq) for idempotent ingest\n\nA station "
     "that retries a POST after a timeout no longer stores the reading twice. The unique "
     "index backs the Redis check.\n",
     {"src/lumen/ingest/dedupe.py": DEDUPE, "src/lumen/ingest/api.py": API_V3,
      "src/lumen/storage/schema.sql": SCHEMA_V2}),
    (None, PRIYA, "2026-10-14T13:00:00+02:00",
     "LUM-7: station overview page\n",
     {"dashboard/src/StationOverview.svelte": OVERVIEW_V1}),
    ("feature/LUM-6-alert-rules", MAYA, "2026-10-16T10:00:00+02:00",
     "Alert rule engine: frost, gust and heavy-rain rules\n",
     {"src/lumen/alerting/rules.py": RULES_V1, "docs/alerting.md": ALERTING_DOC}),
    (None, SAM, "2026-10-17T09:15:00+02:00",
     "Clamp future timestamps from drifting station clocks\n\nReadings more than five "
     "minutes ahead of the server get the server's time.\n\nFixes #7\n",
     {"src/lumen/ingest/clock.py": CLOCK, "src/lumen/ingest/api.py": API_V4}),
    ("feature/LUM-6-alert-rules", MAYA_LOWER, "2026-10-18T15:40:00+02:00",
     "Alert rules fire once per dedupe key\n\nBuilds on the LUM-4 dedupe key: a retried "
     "reading must not raise the same alert twice.\n",
     {"src/lumen/alerting/rules.py": RULES_V2}),
    ("merge", MAYA, "2026-10-20T11:00:00+02:00",
     "Merge branch 'feature/LUM-6-alert-rules'\n", {}),
    (None, PRIYA_GITHUB, "2026-10-24T17:30:00+02:00",
     "Dashboard: break the line at offline gaps\n\nA station that was offline for an hour "
     "drew a straight line across the gap; now a gap longer than three intervals ends "
     "the line. Fixes #15\n",
     {"dashboard/src/StationOverview.svelte": OVERVIEW_V2}),
    (None, SAM, "2026-10-27T12:05:00+01:00",
     "LUM-8: downsample query results to the chart width\n",
     {"src/lumen/query/downsample.py": DOWNSAMPLE}),
    (None, MAYA, "2026-10-29T18:45:00+01:00",
     "LUM-10: stream-lag alarm and the ingest backlog runbook\n",
     {"src/lumen/alerting/rules.py": RULES_V3, "docs/runbooks/ingest-backlog.md": RUNBOOK}),
    (None, MAYA, "2026-10-30T10:00:00+01:00",
     "Describe the components for Jarvis in .jarvis/components.yaml\n",
     {".jarvis/components.yaml": COMPONENTS}),
    # appended last, so that every commit before it keeps its hash
    (None, SAM, "2026-11-02T09:30:00+01:00",
     "Make lumen a regular package\n\nAn __init__.py in every folder under src/lumen, so "
     "`from lumen.ingest.clock import clamp_future` resolves without a namespace-package "
     "lookup.\n",
     {f"src/lumen/{folder}__init__.py": "" for folder in ("", "ingest/", "alerting/",
                                                         "query/")}),
]


def _git(repo: Path, *args: str, who: tuple[str, str] | None = None,
         date: str | None = None) -> str:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(repo), "LC_ALL": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "TZ": "UTC"}
    if who and date:
        env |= {"GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1], "GIT_AUTHOR_DATE": date,
                "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1],
                "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args],
                          env=env, check=True, capture_output=True, text=True).stdout.strip()


def build(repo: Path) -> list[tuple[str, str]]:
    """Create the repository in ``repo`` (an empty directory); (short hash, subject) each."""
    _git(repo, "init", "-q", "-b", "main")
    for branch, who, date, message, files in COMMITS:
        if branch == "merge":
            _git(repo, "merge", "-q", "--no-ff", "-m", message, "feature/LUM-6-alert-rules",
                 who=who, date=date)
            continue
        target = branch or "main"
        if branch and branch not in _git(repo, "branch", "--list", branch):
            _git(repo, "branch", branch)
        if target != "main":
            _git(repo, "checkout", "-q", target)
        for path, content in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(content, encoding="utf-8")
            _git(repo, "add", path)
        _git(repo, "commit", "-q", "-m", message, who=who, date=date)
        if target != "main":
            _git(repo, "checkout", "-q", "main")
    log = _git(repo, "log", "--format=%h %s", "--reverse", "main")
    return [tuple(line.split(" ", 1)) for line in log.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--keep", type=Path, help="also leave the repository in this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = args.keep or Path(tmp) / "lumen"
        repo.mkdir(parents=True, exist_ok=False)
        for short, subject in build(repo):
            print(short, subject)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        _git(repo, "-c", "pack.threads=1", "bundle", "create", "-q", str(args.out.resolve()),
             "HEAD", "main")  # one pack thread: the same bytes on every run
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
