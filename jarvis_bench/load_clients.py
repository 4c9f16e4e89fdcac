"""The clients of ``jarvis bench load``: what each profile's clients call, how each answer is
checked for leaks, and the concurrent clients themselves (the official MCP SDK's streamable
HTTP client, one session per client).

A profile's calls cover every tool a serving process offers for reading (each search mode,
read and read-note, graph, GraphRAG, code search and symbols, list-vaults, vault context,
health, metrics), a resource read and a prompt, aimed at its own documents, plus calls aimed
at documents of the sources it leaves out (by path, key, vault and URI), which must be
refused. An answer leaks when, with the call's own arguments cut out, it names a left-out
source, a document of one (``<source>/<path>``, a ``vault``/``source`` field) or a key or
chunk id only the left-out sources hold.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from jarvis_query.access_log import documents_of

SYMBOL = "clamp_future"
MAX_ERRORS_SHOWN = 10


@dataclass(frozen=True)
class Call:
    kind: str               # tool, resource or prompt
    name: str               # the tool's or prompt's name, or the resource's URI
    arguments: Mapping
    refused: bool = False   # aimed at a left-out source: must come back as an error

    @property
    def label(self) -> str:
        """The name latencies are reported under (a resource by the kind of call)."""
        return {"tool": self.name, "resource": "resources/read"}.get(self.kind,
                                                                      f"prompts/{self.name}")

    def echoes(self) -> list[str]:
        """The call's own strings: an answer repeating them reveals nothing."""
        values = [self.name] if self.kind == "resource" else []
        values += [value for value in self.arguments.values() if isinstance(value, str)]
        return sorted(values, key=len, reverse=True)


@dataclass(frozen=True)
class Plans:
    """Per profile: its sources, the calls its clients cycle through and the strings only
    the sources it leaves out hold (lower case)."""

    sources: Mapping[str, frozenset[str]]
    calls: Mapping[str, list[Call]]
    markers: Mapping[str, frozenset[str]]


def profile_calls(own: dict[str, list[dict]], others: dict[str, list[dict]]) -> list[Call]:
    """The calls of one profile: ``own`` and ``others`` map each of its sources, and each
    source it leaves out, to their documents (path, title, key)."""
    calls: list[Call] = [Call("tool", "list-vaults", {}), Call("tool", "health-status", {}),
                         Call("tool", "performance-metrics", {"hours": 1}),
                         Call("tool", "search-code", {"query": "clamp a future timestamp"})]
    if any(document["type"] == "code" for documents in own.values() for document in documents):
        calls.append(Call("tool", "get-symbol", {"name": SYMBOL}))
    for source, documents in own.items():
        calls.append(Call("tool", "get-vault-context", {"vault": source}))
        for document in documents[:: max(1, len(documents) // 4)][:4]:
            title, path = document["title"] or document["path"], document["path"]
            calls += [
                Call("tool", "search-semantic", {"query": title, "limit": 10}),
                Call("tool", "search-vault", {"query": title}),
                Call("tool", "search-vault", {"query": title, "search_content": True}),
                Call("tool", "search-hybrid", {"query": title, "vault": source}),
                Call("tool", "search-hybrid", {"query": title, "group": "chunk"}),
                Call("tool", "search-graphrag", {"query": title, "limit": 5,
                                                 "max_tokens": 2000}),
                Call("tool", "search-graph", {"query_note_path": path}),
                Call("tool", "read", {"path": path, "vault": source}),
                Call("tool", "read-note", {"path": document["key"]}),
                Call("resource", f"jarvis://{source}/{quote(path)}", {}),
                Call("prompt", "answer-from-notes", {"question": title})]
    for source, documents in others.items():
        document = documents[len(documents) // 2]
        calls += [
            Call("tool", "search-semantic", {"query": document["title"] or document["path"]}),
            Call("tool", "read", {"path": document["path"], "vault": source}, refused=True),
            Call("tool", "read", {"path": document["key"]}, refused=True),
            Call("tool", "search-hybrid", {"query": document["path"], "vault": source},
                 refused=True),
            Call("tool", "search-graph", {"query_note_path": document["key"]}, refused=True),
            Call("resource", f"jarvis://{source}/{quote(document['path'])}", {}, refused=True)]
    return calls


def leaked(text: str, call: Call, allowed: frozenset[str], markers: frozenset[str],
           answer: object) -> list[str]:
    """What of the left-out sources an answer shows: their names, documents and keys."""
    for echo in call.echoes():
        for form in {echo, quote(echo), json.dumps(echo)[1:-1]}:
            text = text.replace(form, "")
    text = comparable(text.replace("\\n", "\n"))
    found = sorted(marker for marker in markers if marker in text)
    found += [name for name in documents_of(answer) if name.split("/", 1)[0] not in allowed]
    found += [value for value in _source_fields(answer) if value not in allowed]
    return found


def comparable(text: str) -> str:
    """``text`` in lower case with each run of white space one space: a title quoted in a
    mail may be wrapped where the commit's is not."""
    return " ".join(text.lower().split())


def _source_fields(answer: object) -> list[str]:
    """Every string under a ``vault`` or ``source`` key, at any depth."""
    if isinstance(answer, Mapping):
        found = [value for key, value in answer.items()
                 if key in ("vault", "source") and isinstance(value, str)]
        return found + [v for value in answer.values() for v in _source_fields(value)]
    if isinstance(answer, list):
        return [v for value in answer for v in _source_fields(value)]
    return []


@dataclass
class LoadRun:
    """What the clients saw, filled in as they call."""

    budget: int
    reserve: int                     # calls held back until every refresh has published
    issued: int = 0
    completed: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    calls_per_client: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)
    failed: int = 0
    leaks: list[dict] = field(default_factory=list)
    leak_count: int = 0
    versions_seen: Counter = field(default_factory=Counter)
    published: list[str] = field(default_factory=list)   # versions, as refreshes publish them
    # published version -> server -> whether each client's first request after it saw it
    switch_checks: dict[str, dict[str, Counter]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))
    refreshes: list[dict] = field(default_factory=list)
    refreshes_done: anyio.Event = field(default_factory=anyio.Event)

    def take(self) -> bool | None:
        """True: make a call; None: wait for the refreshes first; False: the budget is spent."""
        if self.issued >= self.budget:
            return False
        if self.issued >= self.budget - self.reserve and not self.refreshes_done.is_set():
            return None
        self.issued += 1
        return True

    def fail(self, client: str, call: Call, message: str) -> None:
        self.failed += 1
        if len(self.failures) < MAX_ERRORS_SHOWN:
            self.failures.append({"client": client, "call": call.label,
                                  "arguments": dict(call.arguments), "error": message[:500]})


async def _call(session: ClientSession, call: Call) -> tuple[bool, str, object]:
    """(whether the call failed, its answer as text, its structured answer)."""
    if call.kind == "resource":
        found = await session.read_resource(call.name)
        return False, json.dumps([c.model_dump(mode="json") for c in found.contents]), None
    if call.kind == "prompt":
        prompt = await session.get_prompt(call.name, dict(call.arguments))
        return False, json.dumps([m.model_dump(mode="json") for m in prompt.messages]), None
    result = await session.call_tool(call.name, dict(call.arguments))
    text = json.dumps([result.structured_content, [c.model_dump() for c in result.content]])
    return bool(result.is_error), text, result.structured_content


async def client(run: LoadRun, plans: Plans, name: str, profile: str, server: str, url: str,
                 token: str, offset: int) -> None:
    """One client (of token ``name``): a session on ``url`` with ``token``, calling its
    profile's calls in turn (from ``offset``) until the budget is spent; the first call
    after each publish asks health-status which version answers."""
    allowed, markers = plans.sources[profile], plans.markers[profile]
    calls = itertools.islice(itertools.cycle(plans.calls[profile]), offset, None)
    known = 0  # how many publishes this client has checked
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=300) as http, streamable_http_client(
            url, http_client=http) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        await session.list_tools()
        while (go := run.take()) is not False:
            if go is None:
                await run.refreshes_done.wait()
                continue
            published = list(run.published)
            call = Call("tool", "health-status", {}) if len(published) > known else next(calls)
            started = time.perf_counter()
            try:
                error, text, answer = await _call(session, call)
            except Exception as exc:  # a refusal the protocol reports (resources) or worse
                error, text, answer = True, f"{type(exc).__name__}: {exc}", None
            run.latencies[call.label].append((time.perf_counter() - started) * 1000)
            run.completed += 1
            run.calls_per_client[name] += 1
            if error != call.refused:
                run.fail(name, call, text if error else "answered a call it must refuse")
            if found := leaked(text, call, allowed, markers, answer):
                run.leak_count += 1
                if len(run.leaks) < MAX_ERRORS_SHOWN:
                    run.leaks.append({"client": name, "call": call.label,
                                      "arguments": dict(call.arguments), "found": found[:5]})
            if call.name == "health-status" and isinstance(answer, Mapping):
                version = answer["published"]["version"]
                run.versions_seen[version] += 1
                if len(published) > known:
                    run.switch_checks[published[-1]][server][
                        "current" if version >= published[-1] else "behind"] += 1
                    known = len(published)


async def run_clients(run: LoadRun, plans: Plans, clients: list[tuple[str, ...]],
                      refresh: Callable[[], str], refreshes: int) -> None:
    """``clients`` (token name, profile, server, url, token) calling at once; ``refresh``
    (publishes a new version and returns its name) run ``refreshes`` times meanwhile, the
    first once a tenth of the budget is done."""
    async def refresher() -> None:
        while run.completed < run.budget // 10:
            await anyio.sleep(0.1)
        for _ in range(refreshes):
            before, started = run.completed, time.perf_counter()
            version = await anyio.to_thread.run_sync(refresh)
            run.published.append(version)
            run.refreshes.append({"version": version, "calls_during": run.completed - before,
                                  "seconds": round(time.perf_counter() - started, 1)})
        run.refreshes_done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(refresher)
        for number, (name, profile, server, url, token) in enumerate(clients):
            group.start_soon(client, run, plans, name, profile, server, url, token, number)
