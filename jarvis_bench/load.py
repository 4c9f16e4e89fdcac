"""``jarvis bench load``: serving replicas under load, on loopback only.

A copy of the sample (every kind of source, under names no document uses) is refreshed in a
work folder; several `jarvis serve --http` processes serve its data directory at once, four
tokens (made by `jarvis token create`) carry four profiles that split the sources, and
concurrent MCP clients (the official SDK's streamable HTTP client, one token each, spread
over the servers) make a fixed number of mixed calls (jarvis_bench/load_clients.py) while a
note is edited and `jarvis refresh` run, as many times as asked. Reported: the failed calls
(with the first errors), profile leaks, the access log's rows the run wrote against the
calls (per token), the versions the clients saw and whether every client's first request
after each publish saw it, p50/p95/p99 per tool, wall.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import duckdb
import httpx2
import yaml

from jarvis_bench.load_clients import LoadRun, Plans, comparable, profile_calls, run_clients
from jarvis_core.audit import audit_path, latency
from jarvis_core.config import JarvisConfig, load_config
from jarvis_core.settings import CACHE_ENV, MODEL_CACHE_PARTS
from jarvis_core.stores import serving

JARVIS = str(Path(sys.executable).with_name("jarvis"))
EDITED_NOTE = "Projects/Lumen/Architecture/Alerting.md"
# Source names that no document of the sample contains, so finding one in an answer of a
# profile that leaves it out is a leak.
SOURCES = {
    "vaults": {"bench-vault": "vault"},
    "repos": {"bench-repo": {"url": "repos/lumen.bundle", "branch": "HEAD",
                             "docs": ["README*", "docs/**/*.md"]}},
    "tickets": {"bench-jira": "tickets/jira",
                "bench-github": {"path": "tickets/github", "repo": "lumen"}},
    "mail": {"bench-mail": "mail/lumen.mbox"},
    "confluence": {"bench-wiki": "confluence"},
}
PROFILES = {"notes": ["bench-vault"], "code": ["bench-repo", "bench-github"],
            "tracker": ["bench-jira", "bench-mail"], "wiki": ["bench-wiki", "bench-vault"]}
SERVER_START_SECONDS = 180


class LoadError(RuntimeError):
    """A step of the load benchmark failed; the message says which and why."""


def lay_out(work_dir: Path, sample_data: Path, embedding: dict) -> Path:
    """A copy of the sample under ``work_dir`` and its jarvis.yaml (stores in ``data``);
    returns the configuration's path."""
    project = work_dir / "project"
    shutil.copytree(sample_data, project / "sample_data", symlinks=True)

    def located(setting):
        if isinstance(setting, str):
            return str(project / "sample_data" / setting)
        key = "url" if "url" in setting else "path"
        return {**setting, key: located(setting[key])}

    body = {"data_dir": "data", "embedding": embedding, "profiles": PROFILES,
            **{kind: {name: located(setting) for name, setting in sources.items()}
               for kind, sources in SOURCES.items()}}
    path = project / "jarvis.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def seed_model_cache(source: Path, cache: Path) -> None:
    """The converted models and cached vectors copied from ``source`` (the configured
    project's cache) so the sample is not embedded again; nothing is written back there."""
    for part in MODEL_CACHE_PARTS:
        if (source / part).is_dir() and not (cache / part).exists():
            shutil.copytree(source / part, cache / part, symlinks=True)
    cache.mkdir(parents=True, exist_ok=True)


def jarvis(config_path: Path, *args: str, env: dict, timeout: float = 900) -> str:
    """A `jarvis` command's standard output; LoadError with its error output on failure."""
    done = subprocess.run([JARVIS, "--config", str(config_path), *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise LoadError(f"`jarvis {' '.join(args)}` exited {done.returncode}: "
                        f"{done.stderr[-2000:]}")
    return done.stdout


def create_tokens(config_path: Path, env: dict, profiles: list[str]) -> dict[str, str]:
    """One token per profile, made by `jarvis token create`: profile -> token."""
    return {profile: json.loads(jarvis(config_path, "token", "create", "--profile", profile,
                                       "--client", f"load-{profile}", "--json", env=env))["token"]
            for profile in profiles}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Servers:
    """`jarvis serve --http` processes on free loopback ports over one data directory."""

    def __init__(self, config_path: Path, count: int, env: dict, log_dir: Path) -> None:
        self.processes: list[subprocess.Popen] = []
        self.urls: list[str] = []
        self.logs: list[Path] = []
        for number in range(count):
            port = free_port()
            log = log_dir / f"server-{number}.log"
            with log.open("w") as stderr:
                self.processes.append(subprocess.Popen(
                    [JARVIS, "--config", str(config_path), "serve", "--http", str(port),
                     "--rate-limit", "1000000"], stdout=subprocess.DEVNULL, stderr=stderr,
                    env=env))
            self.urls.append(f"http://127.0.0.1:{port}/mcp")
            self.logs.append(log)

    def wait_ready(self) -> None:
        """Until every server answers (401 without a token); LoadError with its log if one
        exits or does not answer in time."""
        deadline = time.monotonic() + SERVER_START_SECONDS
        for url, process, log in zip(self.urls, self.processes, self.logs, strict=True):
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise LoadError(f"the server at {url} did not start: "
                                    f"{log.read_text()[-2000:]}")
                try:
                    if httpx2.post(url, json={}).status_code == 401:
                        break
                except httpx2.TransportError:
                    time.sleep(0.2)

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def documents_by_source(data_dir: Path) -> dict[str, list[dict]]:
    """The published documents of each source (path, title, key): what the clients read."""
    version = serving.current_version(data_dir)
    with duckdb.connect(str(version.tables_path), read_only=True) as tables:
        rows = tables.execute(
            "SELECT source, path, any_value(title), doc_key, any_value(source_type) "
            "FROM chunks GROUP BY source, path, doc_key ORDER BY ALL").fetchall()
    found: dict[str, list[dict]] = {}
    for source, path, title, key, kind in rows:
        found.setdefault(source, []).append(
            {"path": path, "title": title, "key": key, "type": kind})
    return found


def _audit(data_dir: Path, sql: str, *params) -> list[tuple]:
    """``sql`` on the access log, read-only, beside the servers writing it."""
    reader = sqlite3.connect(f"file:{audit_path(data_dir)}?mode=ro", uri=True, timeout=30)
    try:
        return reader.execute(sql, params).fetchall()
    finally:
        reader.close()


def audit_rows(data_dir: Path, after_id: int) -> dict[str, int]:
    """The access log's rows after row ``after_id``, per client (token)."""
    return dict(_audit(data_dir, "SELECT client, count(*) FROM calls WHERE id > ? "
                                 "GROUP BY client", after_id))


def _in(sources) -> str:
    return "(" + ", ".join(f"'{source}'" for source in sorted(sources)) + ")"


def left_out_markers(tables: duckdb.DuckDBPyConnection, allowed: list[str],
                     excluded: list[str]) -> frozenset[str]:
    """Strings only the ``excluded`` sources hold (compared as ``comparable``, 6+
    characters): their names, document and node keys, paths, titles and chunk ids, less any
    that the ``allowed`` sources' own text, titles, paths or graph also contain."""
    found = set(excluded)
    for sql in (f"SELECT doc_key, path, title, chunk_id FROM chunks "
                f"WHERE source IN {_in(excluded)}",
                f"SELECT node_key, title FROM graph_nodes WHERE node_source IN {_in(excluded)}"):
        found.update(value for row in tables.execute(sql).fetchall() for value in row)
    own = comparable(" ".join(str(value) for sql in (
        f"SELECT text, title, path, doc_key FROM chunks WHERE source IN {_in(allowed)}",
        f"SELECT node_key, title, properties FROM graph_nodes WHERE source IN {_in(allowed)}",
        f"SELECT evidence_text FROM graph_edges WHERE source IN {_in(allowed)}")
        for row in tables.execute(sql).fetchall() for value in row))
    return frozenset(comparable(m) for m in found
                     if m and len(m) >= 6 and comparable(m) not in own)


def make_plans(config: JarvisConfig) -> Plans:
    """Each profile's calls and left-out markers, from the published version."""
    documents = documents_by_source(config.data_dir)
    version = serving.current_version(config.data_dir)
    profiles = {name: list(sources) for name, sources in config.profiles.items()}
    with duckdb.connect(str(version.tables_path), read_only=True) as tables:
        markers = {profile: left_out_markers(
            tables, sources, [s for s in config.source_names if s not in sources])
            for profile, sources in profiles.items()}
    calls = {profile: profile_calls(
        {source: documents[source] for source in sources},
        {source: found for source, found in documents.items() if source not in sources})
        for profile, sources in profiles.items()}
    return Plans({profile: frozenset(sources) for profile, sources in profiles.items()},
                 calls, markers)


class Refresher:
    """Edits a note of the first vault and runs `jarvis refresh` on that vault: one new
    version per call."""

    def __init__(self, config: JarvisConfig, env: dict) -> None:
        self.config = config
        self.env = env
        self.vault, settings = next(iter(config.sources_of("vault").items()))
        self.note = settings.path / EDITED_NOTE
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        with self.note.open("a", encoding="utf-8") as note:
            note.write(f"\nRevision {self.count} made while the load ran.\n")
        jarvis(self.config.config_path, "refresh", "--source", self.vault, "--json",
               env=self.env)
        return serving.current_name(self.config.data_dir)


def _last_audit_id(data_dir: Path) -> int:
    return _audit(data_dir, "SELECT coalesce(max(id), 0) FROM calls")[0][0]


def prepare_sample(work_dir: Path, sample_data: Path, embedding: dict,
                   model_cache: Path) -> tuple[Path, dict]:
    """The sample laid out under ``work_dir`` and refreshed: (its configuration's path,
    the environment its commands run in)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", CACHE_ENV: str(work_dir / "cache")}
    seed_model_cache(model_cache, work_dir / "cache")
    config_path = lay_out(work_dir, sample_data, embedding)
    jarvis(config_path, "refresh", "--json", env=env)
    return config_path, env


def measure_load(config_path: Path, env: dict, log_dir: Path, servers: int = 3,
                 clients: int = 32, calls: int = 10_000, refreshes: int = 2) -> dict:
    """``servers`` replicas of a published configuration (with profiles) and ``clients``
    clients, a token per profile, making ``calls`` calls while ``refreshes`` refreshes of
    its first vault publish."""
    config = load_config(config_path)
    if not config.profiles:
        raise LoadError(f"{config_path} configures no profiles: the clients need them")
    tokens = create_tokens(config_path, env, list(config.profiles))
    plans = make_plans(config)
    replicas = Servers(config_path, servers, env, log_dir)
    try:
        replicas.wait_ready()
        first_row = _last_audit_id(config.data_dir)
        profiles = list(config.profiles)
        bound = [(f"load-{profiles[n % len(profiles)]}", profiles[n % len(profiles)],
                  f"server-{n % servers}", replicas.urls[n % servers],
                  tokens[profiles[n % len(profiles)]]) for n in range(clients)]
        run = LoadRun(budget=calls, reserve=min(calls // 2, max(2 * clients, calls // 20)))
        started = time.perf_counter()
        anyio.run(run_clients, run, plans, bound, Refresher(config, env), refreshes)
        wall = time.perf_counter() - started
        written = audit_rows(config.data_dir, first_row)
    finally:
        replicas.stop()
    return {"servers": servers, "clients": clients, "tokens": len(tokens),
            "profiles": {name: list(sources) for name, sources in config.profiles.items()},
            **report(run, written, wall, servers, refreshes)}


def report(run: LoadRun, written: dict[str, int], wall: float, servers: int,
           refreshes: int) -> dict:
    """The figures of one run (see the module's docstring)."""
    checks = {version: {server: dict(counts) for server, counts in sorted(by_server.items())}
              for version, by_server in run.switch_checks.items()}
    switched = len(checks) == refreshes and all(
        len(by_server) == servers and all(set(counts) == {"current"}
                                          for counts in by_server.values())
        for by_server in checks.values())
    per_token = {name: {"calls": count, "audit_rows": written.get(name, 0)}
                 for name, count in sorted(run.calls_per_client.items())}
    return {
        "calls": run.completed, "wall_seconds": round(wall, 1),
        "calls_per_second": round(run.completed / wall, 1),
        "failed_calls": run.failed, "first_errors": run.failures,
        "profile_leaks": run.leak_count, "first_leaks": run.leaks,
        "audit_rows": sum(written.values()),
        "audit_rows_equal_calls": sum(written.values()) == run.completed and all(
            token["calls"] == token["audit_rows"] for token in per_token.values()),
        "audit_per_token": per_token,
        "refreshes": run.refreshes, "versions_seen": dict(sorted(run.versions_seen.items())),
        "first_request_after_publish": checks, "every_server_switched": switched,
        "tools": {label: {"calls": len(values), **latency(values)}
                  for label, values in sorted(run.latencies.items())},
    }
