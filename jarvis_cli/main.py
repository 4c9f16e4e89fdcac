"""`jarvis`: refresh the knowledge base, inspect it and open the UI.

Every command prints a readable summary, or JSON with ``--json`` for scripts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import click

from jarvis_core.config import ConfigError, JarvisConfig, load_config

_DAGSTER_YAML = Path(__file__).with_name("dagster.yaml")


class _Context:
    def __init__(self, config_file: str | None):
        self.config_file = config_file

    def config(self) -> JarvisConfig:
        try:
            return load_config(self.config_file)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc


def _emit(data: dict, as_json: bool, render) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        render(data)


def _table(rows: list[dict], columns: list[str]) -> str:
    widths = {c: max([len(c), *(len(str(r.get(c, ""))) for r in rows)]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns),
             "  ".join("-" * widths[c] for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


@click.group()
@click.option("--config", "config_file", envvar="JARVIS_CONFIG", type=click.Path(),
              help="Configuration file (default: $JARVIS_CONFIG, else ./jarvis.yaml).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None) -> None:
    """Jarvis: your notes, code and tickets as a searchable, linked knowledge base."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ctx.obj = _Context(config_file)


@cli.command()
@click.option("--source", "sources", multiple=True, help="Refresh only this source (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def refresh(obj: _Context, sources: tuple[str, ...], as_json: bool) -> None:
    """Run the main job for every configured source (in-process, embedded stores)."""
    from jarvis_cli.refresh import COUNT_KEYS, run_refresh

    try:
        report = run_refresh(obj.config(), list(sources) or None)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc

    def render(data: dict) -> None:
        for source in data["sources"]:
            click.echo(f"\n{source['source']}: {'ok' if source['ok'] else 'FAILED'} "
                       f"in {source['seconds']} s (run {source['run_id'][:8]})")
            rows = [{"layer": layer, **counts} for layer, counts in source["layers"].items()]
            click.echo(_table(rows, ["layer", *COUNT_KEYS, "embedded", "reused", "rows"]))
            for check in source["checks"]:
                if not check["passed"]:
                    click.echo(f"  check {check['check']} on {check['asset']}: "
                               f"FAILED ({check['severity']})")
            for step in source["failed_steps"]:
                click.echo(f"  step {step} failed: see the run's logs")
        published = data["published"]
        if published is None:
            click.echo("\nnot published: the query side keeps answering from the last "
                       "complete version")
        elif published["ok"]:
            version = published["layers"]["serving_snapshot"]["version"]
            click.echo(f"\npublished serving version {version}")
        else:
            click.echo("\npublishing FAILED: see the run's logs")

    _emit(report, as_json, render)
    if not report["ok"]:
        sys.exit(1)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def status(obj: _Context, as_json: bool) -> None:
    """Show the configured sources and the row counts of every layer."""
    from jarvis_query.status import StoreUnavailable, store_status

    config = obj.config()
    try:
        data = store_status(config)
    except StoreUnavailable as exc:
        raise click.ClickException(str(exc)) from exc

    def render(data: dict) -> None:
        click.echo(f"data directory: {data['data_dir']}")
        published = data["published"]
        click.echo(f"published: {published['version']} ({published['model']})" if published
                   else "published: nothing yet")
        click.echo(_table(data["sources"], ["name", "kind", "notes", "attachments", "commits",
                                            "repo_files", "repo_docs", "failed",
                                            "chunks", "vectors", "nodes", "edges",
                                            "broken_links", "path"]))

    _emit(data, as_json, render)


@cli.command()
@click.option("--limit", default=20, show_default=True, help="Number of notices.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def notifications(obj: _Context, limit: int, as_json: bool) -> None:
    """Show the newest failure notices (failed runs and refreshes), newest first."""
    from jarvis_core.notifications import recent

    notices = recent(obj.config().notifications_path, limit)

    def render(data: dict) -> None:
        if not data["notifications"]:
            click.echo("no failure notices")
        for notice in data["notifications"]:
            steps = f" (steps: {', '.join(notice['failed_steps'])})" \
                if notice["failed_steps"] else ""
            click.echo(f"{notice['created_at']}  {notice['title']}{steps}\n"
                       f"    {notice['message']}")

    _emit({"notifications": notices}, as_json, render)


def _knowledge_base(obj: _Context):
    from jarvis_query.knowledge_base import KnowledgeBase

    return KnowledgeBase(obj.config())


def _query_errors():
    """Bad arguments and missing data become one-line errors, not tracebacks."""
    from jarvis_core.stores.serving import NotPublished
    from jarvis_query.knowledge_base import QueryError

    return (QueryError, NotPublished)


@cli.command()
@click.argument("query")
@click.option("--vault", default=None, help="Search only this vault.")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--threshold", "similarity_threshold", type=float, default=None,
              help="Drop results with a lower cosine similarity.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def search(obj: _Context, query: str, vault: str | None, limit: int,
           similarity_threshold: float | None, as_json: bool) -> None:
    """Semantic search: the chunks nearest in meaning to QUERY."""
    try:
        results = _knowledge_base(obj).search_semantic(query, limit=limit, vault=vault,
                                                       similarity_threshold=similarity_threshold)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc

    def render(data: dict) -> None:
        if not data["results"]:
            click.echo("no results")
        for rank, hit in enumerate(data["results"], 1):
            heading = f" › {hit['heading']}" if hit["heading"] else ""
            click.echo(f"{rank:>2}. {hit['score']:.3f}  {hit['vault']}/{hit['path']}{heading}")
            click.echo(f"    {hit['snippet']}")

    _emit({"query": query, "results": [r.as_dict() for r in results]}, as_json, render)


@cli.command()
@click.argument("note")
@click.option("--depth", default=1, show_default=True, help="Hops from the note (1-3).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def graph(obj: _Context, note: str, depth: int, as_json: bool) -> None:
    """Graph search: the notes, tags and links around NOTE (a path or a title)."""
    try:
        result = _knowledge_base(obj).search_graph(note, depth=depth)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc

    def render(data: dict) -> None:
        if not data["available"]:
            click.echo(data["message"])
            click.echo("semantic results instead:")
            for hit in data["fallback"]:
                click.echo(f"  {hit['score']:.3f}  {hit['vault']}/{hit['path']}")
            return
        center = data["center"]
        click.echo(f"{center['title']} ({data['vault']}/{data['path']}), depth {data['depth']}: "
                   + ", ".join(f"{n} {what}" for what, n in data["counts"].items()
                               if what != "by_relation"))
        for relation, edges in data["relationships"].items():
            click.echo(f"\n{relation} ({len(edges)})")
            for edge in edges[:20]:
                click.echo(f"  {edge['src_title']} → {edge['dst_title']}")
            if len(edges) > 20:
                click.echo(f"  … {len(edges) - 20} more")
        click.echo("\nnotes:")
        for found in data["notes"]:
            tags = f"  #{' #'.join(found['tags'])}" if found["tags"] else ""
            click.echo(f"  [{found['distance']}] {found['title']}{tags}")

    _emit(result, as_json, render)


@cli.command()
@click.argument("note")
@click.option("--vault", default=None, help="Read from this vault.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def read(obj: _Context, note: str, vault: str | None, as_json: bool) -> None:
    """Print NOTE (a vault-relative path or a title) from disk, with its tags and links."""
    from jarvis_query.reading import format_note, read_note

    try:
        data = read_note(_knowledge_base(obj), note, vault)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _emit(data, as_json, lambda d: click.echo(format_note(d)))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def vaults(obj: _Context, as_json: bool) -> None:
    """List the configured vaults and other sources with what is published for them."""
    from jarvis_query.reading import format_vaults, list_vaults

    _emit(list_vaults(_knowledge_base(obj)), as_json, lambda d: click.echo(format_vaults(d)))


@cli.command()
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the server's log to this file (it always goes to stderr).")
@click.pass_obj
def serve(obj: _Context, log_file: Path | None) -> None:
    """Serve the knowledge base to assistants over MCP on stdio (e.g. for Claude Desktop)."""
    from jarvis_query.mcp_server import configure_logging
    from jarvis_query.mcp_server import serve as serve_mcp

    configure_logging(log_file)
    serve_mcp(obj.config())


@cli.command()
@click.argument("vault")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def context(obj: _Context, vault: str, as_json: bool) -> None:
    """VAULT's newest analytics snapshot: figures, trend and whether it is stale."""
    from jarvis_query.context import format_vault_context

    try:
        data = _knowledge_base(obj).get_vault_context(vault)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _emit(data, as_json, lambda d: click.echo(format_vault_context(d)))


def _render_hits(data: dict) -> None:
    """Ranked chunk or document hits: score, place, heading, snippet."""
    if not data["results"]:
        click.echo("no results")
    for rank, hit in enumerate(data["results"], 1):
        heading = f" › {hit['heading']}" if hit["heading"] else ""
        legs = ""
        if "keyword_rank" in hit:
            legs = "  (keyword #{}, semantic #{})".format(hit["keyword_rank"] or "–",
                                                          hit["semantic_rank"] or "–")
        click.echo(f"{rank:>2}. {hit['score']:.4f}  {hit['vault']}/{hit['path']}{heading}{legs}")
        if hit["snippet"]:
            click.echo(f"    {hit['snippet']}")


@cli.command()
@click.argument("query")
@click.option("--content", "search_content", is_flag=True,
              help="Match chunk text (with a highlighted preview), not note names and paths.")
@click.option("--vault", default=None, help="Search only this vault (or source).")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def keyword(obj: _Context, query: str, search_content: bool, vault: str | None, limit: int,
            as_json: bool) -> None:
    """Keyword search (BM25): notes whose name or path matches QUERY, or with --content the
    chunks whose text does."""
    try:
        results = _knowledge_base(obj).search_vault(query, search_content=search_content,
                                                    limit=limit, vault=vault)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _emit({"query": query, "results": results}, as_json, _render_hits)


@cli.command()
@click.argument("query")
@click.option("--vault", default=None, help="Search only this vault (or source).")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--alpha", type=float, default=None,
              help="Weighted fusion instead of RRF: 0 = keyword only, 1 = vector only.")
@click.option("--type", "source_types", multiple=True,
              help="Only this source type, e.g. note, commit, ticket (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only chunks with this tag (repeatable: any).")
@click.option("--after", "modified_after", default=None,
              help="Modified on or after this ISO date or date-time.")
@click.option("--before", "modified_before", default=None,
              help="Modified on or before this ISO date (the whole day) or date-time.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def hybrid(obj: _Context, query: str, vault: str | None, limit: int, alpha: float | None,
           source_types: tuple[str, ...], tags: tuple[str, ...], modified_after: str | None,
           modified_before: str | None, as_json: bool) -> None:
    """Hybrid search: keyword (BM25) and semantic results for QUERY, fused."""
    try:
        results = _knowledge_base(obj).search_hybrid(
            query, limit=limit, vault=vault, alpha=alpha, source_types=list(source_types) or None,
            tags=list(tags) or None, modified_after=modified_after,
            modified_before=modified_before)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc
    _emit({"query": query, "results": results}, as_json, _render_hits)


@cli.command()
@click.argument("query")
@click.option("--vault", default=None, help="Search only this vault (or source).")
@click.option("--limit", default=10, show_default=True, help="Number of sources (1-50).")
@click.option("--depth", default=1, show_default=True, help="Graph hops around each hit (1-3).")
@click.option("--max-tokens", default=6500, show_default=True,
              help="Token budget of the context block.")
@click.option("--context", "context_only", is_flag=True,
              help="Print only the context block (for pasting into an assistant).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def graphrag(obj: _Context, query: str, vault: str | None, limit: int, depth: int,
             max_tokens: int, context_only: bool, as_json: bool) -> None:
    """GraphRAG evidence pack: hits for QUERY reranked through the knowledge graph, the
    subgraph linking them and a context block within the token budget."""
    try:
        pack = _knowledge_base(obj).search_graphrag(query, limit=limit, vault=vault, depth=depth,
                                                    max_tokens=max_tokens)
    except _query_errors() as exc:
        raise click.ClickException(str(exc)) from exc

    def render(data: dict) -> None:
        if context_only:
            click.echo(data["context"])
            return
        if data["graph_message"]:
            click.echo(data["graph_message"])
        rows = [{"#": s["rank"], "score": s["score"], **s["components"],
                 "via": s["found_by"], "links": len(s["evidence"]),
                 "source": f"{s['vault']}/{s['path']}"} for s in data["sources"]]
        click.echo(_table(rows, ["#", "score", "semantic", "graph", "centrality", "recency",
                                 "via", "links", "source"]))
        subgraph = data["subgraph"]
        click.echo(f"\nsubgraph: {len(subgraph['nodes'])} nodes, {len(subgraph['edges'])} edges; "
                   f"context: {data['tokens']} of {data['max_tokens']} tokens"
                   + (" (cut to fit)" if data["truncated"] else ""))

    _emit(pack, as_json and not context_only, render)


@cli.command(name="eval")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--mode", type=click.Choice(["dense", "bm25", "hybrid"]), default="dense",
              show_default=True, help="Vectors, the keyword index, or both fused (RRF).")
@click.option("--split", default="test", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def evaluate(obj: _Context, dataset: str, mode: str, split: str, as_json: bool) -> None:
    """Retrieval quality (nDCG@10, recall@10) on a BEIR-layout DATASET directory."""
    import time

    from jarvis_bench.evaluation import load_beir, rankings, score
    from jarvis_core.text.embedder import Embedder

    config = obj.config()
    try:
        data = load_beir(Path(dataset), split)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise click.ClickException(f"{dataset}: {exc}") from exc
    started = time.perf_counter()
    settings = config.embedding
    embedder = None if mode == "bm25" else Embedder(
        settings.model, device=settings.device, batch_size=settings.batch_size,
        backend=settings.backend, cache_dir=config.cache_dir)
    index_dir = config.data_dir / "eval" / data.name
    ranked = rankings(data, config, mode, embedder, index_dir)
    result = {"dataset": data.name, "mode": mode, "model": embedder and embedder.model,
              "backend": embedder and embedder.backend, "queries": len(data.queries),
              "documents": len(data.corpus), **score(data, ranked),
              "seconds": round(time.perf_counter() - started, 1)}
    _emit(result, as_json, lambda d: click.echo(
        f"{d['dataset']} ({d['mode']}, {d['queries']} queries): "
        f"nDCG@10 {d['ndcg_at_10']:.4f}, recall@10 {d['recall_at_10']:.4f}"))


@cli.group()
def bench() -> None:
    """Benchmarks that print figures (JSON with --json)."""


@bench.command(name="embed")
@click.option("--chunks", "n_chunks", default=256, show_default=True)
@click.option("--batch-size", default=32, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_embed(obj: _Context, n_chunks: int, batch_size: int, as_json: bool) -> None:
    """Embedding throughput and fidelity of every backend available here."""
    from jarvis_bench.embed import run_embed_benchmark

    config = obj.config()
    result = run_embed_benchmark(config.embedding.model, n_chunks=n_chunks,
                                 batch_size=batch_size, cache_dir=config.cache_dir)

    def render(data: dict) -> None:
        rows = [{"backend": name, **entry} for name, entry in data["backends"].items()]
        click.echo(_table(rows, ["backend", "chunks_per_s", "mean_cosine", "min_cosine",
                                 "top10_overlap", "reason"]))
        click.echo(f"default: {data['default_backend']} = {data['default_vs_fastest']:.0%} "
                   f"of the fastest ({data['fastest_backend']})")

    _emit(result, as_json, render)


@bench.command(name="search")
@click.option("--sizes", default="10000,100000", show_default=True,
              help="Comma-separated corpus sizes (chunks).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_search(obj: _Context, sizes: str, as_json: bool) -> None:
    """Semantic query latency (p50/p95, query embedding included) per corpus size."""
    from jarvis_bench.search import run_search_benchmark

    config = obj.config()
    try:
        parsed = tuple(int(size) for size in sizes.split(","))
    except ValueError as exc:
        raise click.ClickException(f"--sizes: not a list of integers: {sizes}") from exc
    result = run_search_benchmark(config.embedding.model, parsed, cache_dir=config.cache_dir)

    def render(data: dict) -> None:
        rows = [{"chunks": size, **figures} for size, figures in data["sizes"].items()]
        click.echo(_table(rows, ["chunks", "p50_ms", "p95_ms", "index_build_seconds",
                                 "snapshot_open_seconds"]))

    _emit(result, as_json, render)


@bench.command(name="query")
@click.option("--chunks", "n_chunks", default=100_000, show_default=True,
              help="Corpus size (chunks, five per note).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_query(obj: _Context, n_chunks: int, as_json: bool) -> None:
    """Latency (p50/p95) of keyword, semantic, hybrid, graph and GraphRAG queries on a
    generated published version of the embedded stores."""
    from jarvis_bench.query import run_query_benchmark

    if n_chunks < 1_000:
        raise click.ClickException(f"--chunks: at least 1000, got {n_chunks}")
    config = obj.config()
    result = run_query_benchmark(config.embedding.model, n_chunks, cache_dir=config.cache_dir)

    def render(data: dict) -> None:
        click.echo(f"{data['chunks']} chunks, {data['notes']} notes, "
                   f"{data['graph_edges']} graph edges, {data['queries']} queries")
        rows = [{"tool": tool, **figures} for tool, figures in data["tools"].items()]
        click.echo(_table(rows, ["tool", "p50_ms", "p95_ms", "goal_p50_ms"]))

    _emit(result, as_json, render)


@bench.command(name="graph")
@click.option("--notes", default=10_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_graph(notes: int, as_json: bool) -> None:
    """Graph neighbourhood and graph search latency on a generated graph."""
    from jarvis_bench.graph import run_graph_benchmark

    result = run_graph_benchmark(notes)

    def render(data: dict) -> None:
        rows = [{"query": name, **figures} for name, figures in data["neighbourhood"].items()]
        rows.append({"query": "graph_search depth 2", **data["graph_search_depth_2"]})
        click.echo(f"{data['notes']} notes, {data['nodes']} nodes, {data['edges']} edges")
        click.echo(_table(rows, ["query", "p50_ms", "p95_ms", "nodes_p50"]))

    _emit(result, as_json, render)


@bench.command(name="sensor")
@click.option("--notes", default=10_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_sensor(notes: int, as_json: bool) -> None:
    """Vault sensor tick time on a generated vault with nothing changed."""
    from jarvis_bench.sensor import run_sensor_benchmark

    _emit(run_sensor_benchmark(notes), as_json,
          lambda data: click.echo(json.dumps(data, indent=2)))


@bench.command(name="analytics")
@click.option("--notes", default=10_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_analytics(notes: int, as_json: bool) -> None:
    """Vault context latency (cached, fresh) and snapshot compute time on a generated vault."""
    from jarvis_bench.analytics import run_analytics_benchmark

    _emit(run_analytics_benchmark(notes), as_json,
          lambda data: click.echo(json.dumps(data, indent=2)))


@cli.command()
@click.option("--port", default=3000, show_default=True)
@click.pass_obj
def ui(obj: _Context, port: int) -> None:
    """Open the Dagster UI on workspace.yaml, with a persistent instance in the data dir."""
    config = obj.config()
    home = Path(os.environ.get("DAGSTER_HOME") or config.data_dir / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copy(_DAGSTER_YAML, home / "dagster.yaml")
    workspace = Path.cwd() / "workspace.yaml"
    if not workspace.is_file():
        raise click.ClickException(f"run `jarvis ui` from the project folder: {workspace} "
                                   "not found")
    os.environ["DAGSTER_HOME"] = str(home)
    if config.config_path:
        os.environ.setdefault("JARVIS_CONFIG", str(config.config_path))
    os.execvp("dagster", ["dagster", "dev", "-w", str(workspace), "-p", str(port)])
