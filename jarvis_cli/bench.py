"""`jarvis eval` and `jarvis bench …`: evaluation and benchmarks that print figures (JSON with
--json). The only importer of jarvis_bench, each command importing what it measures."""

from __future__ import annotations

import json
from pathlib import Path

import click

from jarvis_cli.bench_load import bench_load
from jarvis_cli.bench_options import embedder_of, sizes_of
from jarvis_cli.bench_parallel import bench_parallel
from jarvis_cli.bench_scale import bench_scale
from jarvis_cli.common import CliContext, answering, emit
from jarvis_core.embedding_backends import BACKENDS
from jarvis_query.render import table


@click.command(name="eval")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--mode", type=click.Choice(["dense", "bm25", "hybrid", "all"]), default="dense",
              show_default=True,
              help="Vectors, the keyword index, both fused (RRF), or all three (each leg "
                   "searched once).")
@click.option("--split", default="test", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def evaluate(obj: CliContext, dataset: str, mode: str, split: str, as_json: bool) -> None:
    """Retrieval quality (nDCG@10, recall@10) on a BEIR-layout DATASET directory, with hits
    grouped by document (the searches' default) and as chunks."""
    import time

    from jarvis_bench.evaluation import MODES, load_beir, rankings, score

    config = obj.config()
    try:
        data = load_beir(Path(dataset), split)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise click.ClickException(f"{dataset}: {exc}") from exc
    started = time.perf_counter()
    modes = MODES if mode == "all" else (mode,)
    embedder = None if modes == ("bm25",) else embedder_of(config)
    index_dir = config.data_dir / "eval" / data.name
    ranked = rankings(data, config, modes, embedder, index_dir)
    result = {"dataset": data.name, "model": embedder and embedder.model,
              "backend": embedder and embedder.backend, "queries": len(data.queries),
              "documents": len(data.corpus),
              "modes": {name: {group: score(data, ranking) for group, ranking in by_group.items()}
                        for name, by_group in ranked.items()},
              "seconds": round(time.perf_counter() - started, 1)}

    def render(d: dict) -> None:
        for name, groups in d["modes"].items():
            click.echo(f"{d['dataset']} ({name}, {d['queries']} queries): nDCG@10 "
                       f"{groups['document']['ndcg_at_10']:.4f} by document, "
                       f"{groups['chunk']['ndcg_at_10']:.4f} by chunk; recall@10 "
                       f"{groups['document']['recall_at_10']:.4f}, "
                       f"{groups['chunk']['recall_at_10']:.4f}")

    emit(result, as_json, render)


@click.group()
def bench() -> None:
    """Benchmarks that print figures (JSON with --json)."""


@bench.command(name="embed")
@click.option("--chunks", "n_chunks", default=256, show_default=True)
@click.option("--batch-size", default=32, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=None,
              help="Timed runs per backend, the median reported  [default: 3]")
@click.option("--scifact", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="A BEIR dataset (../shared/eval/scifact): the quality gate, "
              "nDCG@10 dense and hybrid per backend (minutes: each embeds the corpus).")
@click.option("--scifact-backends", default=",".join(BACKENDS), show_default=True,
              help="Comma-separated backends the quality gate measures (float32 OpenVINO, "
              "the reference, always).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_embed(obj: CliContext, n_chunks: int, batch_size: int, repeats: int | None,
                scifact: Path | None, scifact_backends: str, as_json: bool) -> None:
    """Embedding throughput, fidelity and share of the CPU's peak of every backend available
    here, OpenVINO's hints, streams and batch sizes compared, and the one auto picks."""
    from jarvis_bench.embed import REPEATS, run_embed_benchmark

    config = obj.config()
    result = run_embed_benchmark(config.embedding.model, n_chunks=n_chunks,
                                 batch_size=batch_size, cache_dir=config.cache_dir,
                                 repeats=repeats or REPEATS, scifact=scifact, config=config,
                                 scifact_backends=tuple(scifact_backends.split(",")))

    def render(data: dict) -> None:
        rows = [{"backend": name, **entry} for name, entry in data["backends"].items()]
        click.echo(table(rows, ["backend", "precision", "chunks_per_s", "cores_used",
                                 "share_of_peak", "mean_cosine", "min_cosine",
                                 "top10_overlap", "reason"]))
        if "openvino_settings" in data:
            click.echo(table(data["openvino_settings"], ["hint", "streams", "requests",
                                                         "batch_size", "chunks_per_s"]))
        if "scifact" in data:
            click.echo(table([{"backend": name, "chunks_per_s": entry["chunks_per_s"],
                               **{f"{mode} ({queries})": entry[queries][mode]["ndcg_at_10"]
                                  for queries in ("own_queries", "f32_queries")
                                  for mode in ("dense", "hybrid")},
                               "gate": entry["meets_gate"]}
                              for name, entry in data["scifact"]["backends"].items()],
                             ["backend", "chunks_per_s", "dense (own_queries)",
                              "hybrid (own_queries)", "dense (f32_queries)",
                              "hybrid (f32_queries)", "gate"]))
        auto = data["auto_choice"]
        click.echo(f"auto: {auto['backend']} ({auto['precision']}): {auto['reason']}; "
                   f"{data['default_vs_fastest']:.0%} of the fastest "
                   f"({data['fastest_backend']})")

    emit(result, as_json, render)


@bench.command(name="search")
@click.option("--sizes", default="10000,100000", show_default=True,
              help="Comma-separated corpus sizes (chunks).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_search(obj: CliContext, sizes: str, as_json: bool) -> None:
    """Semantic query latency (p50/p95, query embedding included) per corpus size."""
    from jarvis_bench.search import run_search_benchmark

    config = obj.config()
    parsed = sizes_of(sizes)
    result = run_search_benchmark(config.embedding.model, parsed, cache_dir=config.cache_dir)

    def render(data: dict) -> None:
        rows = [{"chunks": size, **figures} for size, figures in data["sizes"].items()]
        click.echo(table(rows, ["chunks", "p50_ms", "p95_ms", "index_build_seconds",
                                 "snapshot_open_seconds"]))

    emit(result, as_json, render)


@bench.command(name="query")
@click.option("--chunks", "n_chunks", default=100_000, show_default=True,
              help="Corpus size (chunks, five per note).")
@click.option("--queries", "n_queries", default=100, show_default=True,
              help="Queries timed per tool, after ten untimed ones; at most one per note.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_query(obj: CliContext, n_chunks: int, n_queries: int, as_json: bool) -> None:
    """Latency (p50/p95) of keyword, semantic, hybrid, graph and GraphRAG queries on a
    generated published version of the embedded stores."""
    from jarvis_bench.query import CHUNKS_PER_NOTE, run_query_benchmark

    if n_chunks < 1_000:
        raise click.ClickException(f"--chunks: at least 1000, got {n_chunks}")
    if not 0 < n_queries <= n_chunks // CHUNKS_PER_NOTE:
        raise click.ClickException(f"--queries: between 1 and one per note "
                                   f"({n_chunks // CHUNKS_PER_NOTE}), got {n_queries}")
    config = obj.config()
    result = run_query_benchmark(config.embedding.model, n_chunks, n_queries,
                                 cache_dir=config.cache_dir)

    def render(data: dict) -> None:
        click.echo(f"{data['chunks']} chunks, {data['notes']} notes, "
                   f"{data['graph_edges']} graph edges, {data['queries']} queries")
        rows = [{"tool": tool, **figures} for tool, figures in data["tools"].items()]
        click.echo(table(rows, ["tool", "p50_ms", "p95_ms", "goal_p50_ms"]))

    emit(result, as_json, render)


@bench.command(name="identifiers")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_identifiers(obj: CliContext, as_json: bool) -> None:
    """Whether keyword, semantic and hybrid search put the item an identifier names first
    (every ticket key, commit hash prefix, Message-ID and page id published), and how fast."""
    from jarvis_bench.identifiers import run_identifier_benchmark

    config = obj.config()
    with answering():
        result = run_identifier_benchmark(config)

    def render(data: dict) -> None:
        kinds = ", ".join(f"{count} {kind}" for kind, count in data["identifiers"].items())
        click.echo(f"{data['queries']} identifier queries ({kinds or 'none'}), version "
                   f"{data['version']}; goals: first {data['goal_first']}, p50 ≤ "
                   f"{data['goal_p50_ms']} ms")
        rows = [{"search": name, **figures} for name, figures in data["modes"].items()]
        click.echo(table(rows, ["search", "first", "found_first", "p50_ms", "p95_ms"]))
        for name, figures in data["modes"].items():
            for miss in figures["misses"]:
                click.echo(f"{name}: {miss['query']} found {miss['first']} first, not "
                           f"{miss['wanted']}")

    emit(result, as_json, render)


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
        click.echo(table(rows, ["query", "p50_ms", "p95_ms", "nodes_p50"]))

    emit(result, as_json, render)


@bench.command(name="coldstart")
@click.option("--runs", default=5, show_default=True, help="Cold runs of each command.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_coldstart(obj: CliContext, runs: int, as_json: bool) -> None:
    """Cold-process wall and CPU time of the query commands and of a fresh MCP server's
    first semantic answer, with the modules each imported, on the published sample data."""
    from jarvis_bench.coldstart import COLUMNS, run_coldstart_benchmark

    if runs < 1:
        raise click.ClickException(f"--runs: at least 1, got {runs}")
    config = obj.config()
    with answering():
        result = run_coldstart_benchmark(config, runs)

    def render(data: dict) -> None:
        rows = [{"command": name, **figures, "heavy": ", ".join(figures["heavy"]) or "none"}
                for name, figures in data["commands"].items()]
        click.echo(table(rows, COLUMNS))
        click.echo("ratios: " + ", ".join(f"{name} {value}"
                                          for name, value in data["ratios"].items()))
        click.echo(f"heavy modules imported by a query command: "
                   f"{', '.join(data['heavy_modules_imported']) or 'none'}")

    emit(result, as_json, render)


@bench.command(name="sensor")
@click.option("--notes", default=10_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_sensor(notes: int, as_json: bool) -> None:
    """Vault sensor tick time on a generated vault with nothing changed."""
    from jarvis_bench.sensor import run_sensor_benchmark

    emit(run_sensor_benchmark(notes), as_json,
          lambda data: click.echo(json.dumps(data, indent=2)))


@bench.command(name="analytics")
@click.option("--notes", default=10_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench_analytics(notes: int, as_json: bool) -> None:
    """Vault context latency (cached, fresh) and snapshot compute time on a generated vault."""
    from jarvis_bench.analytics import run_analytics_benchmark

    emit(run_analytics_benchmark(notes), as_json,
          lambda data: click.echo(json.dumps(data, indent=2)))




@bench.command(name="startup")
@click.option("--runs", default=5, show_default=True, help="Cold runs of each command.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_startup(obj: CliContext, runs: int, as_json: bool) -> None:
    """Cold-process cost of importing and loading the Dagster definitions, against importing
    Dagster alone (the goal: import ≤ 1.5× dagster), and the files importing created."""
    from jarvis_bench.startup import run_startup_benchmark

    config = obj.config()
    result = run_startup_benchmark(config.config_path, runs)

    def render(data: dict) -> None:
        rows = [{"what": name, **figures} for name, figures in data.items()
                if isinstance(figures, dict)]
        click.echo(table(rows, ["what", "wall_seconds", "cpu_seconds"]))
        click.echo(f"import / dagster: {data['import_ratio_wall']} (wall), "
                   f"{data['import_ratio_cpu']} (CPU); load / dagster: "
                   f"{data['load_ratio_wall']}; goal ≤ {data['goal_ratio']}; files created by "
                   f"the import: {data['files_created_by_import'] or 'none'}")

    emit(result, as_json, render)


@bench.command(name="ingest")
@click.option("--jira", type=click.Path(exists=True, path_type=Path),
              default="../shared/eval/jira/AC.tar.gz", show_default=True,
              help="A Jira REST export (.tar.gz or folder of issue JSON files).")
@click.option("--notes", default=10_000, show_default=True, help="Notes of the generated vault.")
@click.option("--markup-sample", default=200, show_default=True,
              help="Tickets also converted by jira2markdown (it is slow).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_ingest(obj: CliContext, jira: Path, notes: int, markup_sample: int,
                 as_json: bool) -> None:
    """Jira markup against jira2markdown, a real export through every layer but the
    embeddings, a generated vault's first, first-published and no-op refresh, and a no-op
    refresh of the configured sources against `jarvis status` (embeddings for real)."""
    from jarvis_bench.ingest import run_ingest_benchmark

    result = run_ingest_benchmark(obj.config(), jira, notes, markup_sample)

    def render(data: dict) -> None:
        click.echo(f"jira markup: ours {data['jira_markup']['ours']['tickets_per_second']} "
                   f"tickets/s, {data['jira_speedup']}x jira2markdown")
        for part in ("jira_export", "generated_vault", "sample_noop"):
            click.echo(f"\n{part}:")
            click.echo(table([{"figure": k, "value": v} for k, v in data[part].items()],
                             ["figure", "value"]))

    emit(result, as_json, render)


@bench.command(name="code")
@click.argument("repo", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--search", is_flag=True, help="Also measure code search CodeSearchNet-style "
              "(each documented function's first docstring sentence finds it, indexed without "
              "its docstring): MRR@10, recall@10 keyword, semantic, hybrid (embeds the corpus).")
@click.option("--max-symbols", default=2000, show_default=True, type=click.IntRange(min=1),
              help="Symbols indexed at most by --search (a fixed sample when REPO has more).")
@click.option("--scale", "scale_files", default=0, show_default=True,
              type=click.IntRange(min=0), help="Also ingest the symbol layer of a generated "
              "repository of this many files: first ingest, one-file change, no-op.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def bench_code(obj: CliContext, repo: Path, search: bool, max_symbols: int, scale_files: int,
               as_json: bool) -> None:
    """Whether the definitions read from REPO's source (its HEAD) agree with Universal Ctags
    (recall, precision by file, name and line ±1, per language), and files/s, symbols/s."""
    import shutil

    from jarvis_bench.code import run_code_benchmark
    from jarvis_core.sources.repo.git import GitError

    if shutil.which("ctags") is None:
        raise click.ClickException("the ctags command (Universal Ctags) is not installed")
    try:
        result = run_code_benchmark(repo.resolve())
        if search:
            from jarvis_bench.code_search import run_code_search

            config = obj.config()
            result["search"] = run_code_search(repo.resolve(), config, embedder_of(config),
                                               max_symbols=max_symbols)
    except GitError as exc:
        raise click.ClickException(f"REPO: {exc}") from exc
    if scale_files:
        from jarvis_bench.code_scale import run_scale_benchmark

        result["scale"] = run_scale_benchmark(scale_files)
    emit(result, as_json, _render_code)


def _render_code(data: dict) -> None:
    agreement, parse = data["ctags"], data["parse"]
    rows = [{"language": name, **figures} for name, figures in agreement["languages"].items()]
    rows.append({"language": "all", **{key: agreement[key] for key in (
        "ctags_definitions", "jarvis_definitions", "matched", "recall", "precision")}})
    click.echo(f"{data['repository']} at {data['head'][:12]} against {agreement['version']}")
    click.echo(table(rows, ["language", "ctags_definitions", "jarvis_definitions",
                            "matched", "recall", "precision"]))
    click.echo(f"parse: {parse['files']} files, {parse['symbols']} symbols in "
               f"{parse['seconds']} s ({parse['files_per_s']} files/s, "
               f"{parse['symbols_per_s']} symbols/s); partial {parse['partial']}, "
               f"skipped {parse['skipped'] or 'none'}")
    if "search" in data:
        found = data["search"]
        click.echo(f"search: {found['queries']} queries, {found['documents']} documents")
        click.echo(table([{"mode": mode, **figures} for mode, figures in found["modes"].items()],
                         ["mode", "mrr_at_10", "recall_at_10"]))
    if "scale" in data:
        click.echo(table([{"figure": key, "value": value} for key, value in data["scale"].items()
                          if key != "runs"], ["figure", "value"]))


# The commands with a module of their own.
for _command in (bench_scale, bench_load, bench_parallel):
    bench.add_command(_command)
