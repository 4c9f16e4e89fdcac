"""Jira wiki markup conversion: our linear converter against jira2markdown on a real export.

Every ticket (description and comment bodies) goes through ``jira_to_markdown``. A sample goes
through jira2markdown too, twice: the plain library call ``jira2markdown.convert`` (which
builds its grammar on every call) and the grammar built once, as the ticket source used it.
jira2markdown needs minutes for some real tickets, so it runs in a child process with a cap
per ticket and one for the whole run; throughput is compared on the tickets it finished, in
the same run. Agreement is the share of those tickets whose text is the same after whitespace
normalisation; the rest are sorted into kinds of difference, each with a count, an example
and the reason.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty, Queue

from jarvis_core.sources.tickets.markup import BUDGET_SECONDS, jira_to_markdown

Ticket = tuple[str, list[str]]  # key, wiki-markup bodies (description first, then comments)
_STARTUP_SECONDS = 120.0  # the child imports pyparsing and jira2markdown
_EXAMPLE_CONTEXT = 70


def run_markup_benchmark(export: Path, sample_for_reference: int | None = 200, *,
                         reference_seconds: float = 60.0, ticket_seconds: float = 5.0,
                         budget_seconds: float = BUDGET_SECONDS, seed: int = 14) -> dict:
    """Figures for ``export`` (a .tar.gz of Jira REST issue JSON files, or a folder of them).

    ``sample_for_reference`` tickets (all when None) go through jira2markdown, each variant
    for at most ``reference_seconds`` and ``ticket_seconds`` per ticket."""
    tickets, unreadable = read_export(Path(export))
    ours = _convert_ours(tickets, budget_seconds)
    sample = (tickets if sample_for_reference is None or sample_for_reference >= len(tickets)
              else random.Random(seed).sample(tickets, sample_for_reference))
    plain = _run_reference("convert", sample, reference_seconds, ticket_seconds)
    once = _run_reference("grammar_once", sample, reference_seconds, ticket_seconds)
    report = {
        "export": str(export), "tickets": len(tickets),
        "items": sum(len(bodies) for _, bodies in tickets),
        "characters": sum(len(body) for _, bodies in tickets for body in bodies),
        "unreadable_files": len(unreadable), "unreadable_examples": unreadable[:5],
        "ours": _our_figures(tickets, ours, budget_seconds),
        "jira2markdown": _reference_figures(plain, ours, "jira2markdown.convert per item"),
        "jira2markdown_grammar_once": _reference_figures(
            once, ours, "grammar built once, transform_string per item"),
    }
    report["jira_speedup"] = report["jira2markdown"]["speedup"]
    report["jira_speedup_grammar_once"] = report["jira2markdown_grammar_once"]["speedup"]
    report["agreement"] = agreement(dict(sample), plain["finished"], ours["markdown"])
    return report


def read_export(export: Path) -> tuple[list[Ticket], list[str]]:
    """(key, bodies) of every issue in the export, sorted by key, and the files that could
    not be read, each as 'name: reason'."""
    tickets, unreadable = [], []
    for name, data in _json_files(export):
        try:
            document = json.loads(data)
            issues = document.get("issues") if isinstance(document, dict) else None
            for issue in issues if isinstance(issues, list) else [document]:
                tickets.append(_ticket(issue))
        except (ValueError, TypeError, AttributeError) as exc:
            unreadable.append(f"{name}: {exc}")
    return sorted(tickets), unreadable


def _json_files(export: Path) -> Iterator[tuple[str, bytes]]:
    if export.is_dir():
        for file in sorted(export.rglob("*.json")):
            yield str(file.relative_to(export)), file.read_bytes()
        return
    with tarfile.open(export, "r:*") as archive:
        for member in archive:
            if member.isfile() and member.name.endswith(".json"):
                handle = archive.extractfile(member)
                if handle is not None:
                    yield member.name, handle.read()


def _ticket(issue: object) -> Ticket:
    fields = issue.get("fields") if isinstance(issue, dict) else None
    if not isinstance(fields, dict) or "key" not in issue:
        raise ValueError("not a Jira issue (no 'key' and 'fields')")
    comments = (fields.get("comment") or {}).get("comments") or []
    bodies = [fields.get("description")] + [c.get("body") for c in comments
                                             if isinstance(c, dict)]
    return str(issue["key"]), [body for body in bodies if isinstance(body, str)]


def _convert_ours(tickets: list[Ticket], budget_seconds: float) -> dict:
    """Our markdown for every ticket, with wall-clock seconds (throughput) and CPU seconds
    (what the budget counts) per ticket."""
    seconds, cpu, markdown, over_budget, slowest_item = {}, {}, {}, [], (0.0, "")
    for key, bodies in tickets:
        started, cpu_started = time.perf_counter(), time.thread_time()
        outputs = []
        for body in bodies:
            item_started = time.thread_time()
            result = jira_to_markdown(body, budget_seconds=budget_seconds)
            slowest_item = max(slowest_item, (time.thread_time() - item_started, key))
            outputs.append(result.markdown)
            if result.warning:
                over_budget.append(key)
        seconds[key] = time.perf_counter() - started
        cpu[key] = time.thread_time() - cpu_started
        markdown[key] = outputs
    return {"seconds": seconds, "cpu_seconds": cpu, "markdown": markdown,
            "over_budget": over_budget, "slowest_item": slowest_item}


def _our_figures(tickets: list[Ticket], ours: dict, budget_seconds: float) -> dict:
    total = sum(ours["seconds"].values())
    slowest = max(ours["cpu_seconds"].items(), key=lambda item: item[1])
    return {"tickets_per_second": round(len(tickets) / total, 1), "seconds": round(total, 3),
            "slowest_ticket": slowest[0],
            "slowest_ticket_cpu_ms": round(slowest[1] * 1000, 1),  # what the budget counts
            "slowest_ticket_wall_ms": round(ours["seconds"][slowest[0]] * 1000, 1),
            "slowest_item_cpu_ms": round(ours["slowest_item"][0] * 1000, 1),
            "budget_ms": budget_seconds * 1000,
            "items_over_budget": len(ours["over_budget"]),
            "tickets_over_budget": sorted(set(ours["over_budget"]))}


def _reference_figures(run: dict, ours: dict, variant: str) -> dict:
    """jira2markdown's throughput and ours on exactly the tickets it finished."""
    finished = run["finished"]
    theirs_seconds = sum(seconds for seconds, _ in finished.values())
    ours_seconds = sum(ours["seconds"][key] for key in finished)
    theirs = len(finished) / theirs_seconds if theirs_seconds else None
    same = len(finished) / ours_seconds if ours_seconds else None
    return {"variant": variant, "sampled": run["sampled"], "finished": len(finished),
            "timed_out": run["timed_out"], "failed": run["failed"],
            "not_reached": run["not_reached"], "seconds": round(theirs_seconds, 1),
            "tickets_per_second": round(theirs, 2) if theirs else None,
            "ours_tickets_per_second_same_tickets": round(same, 1) if same else None,
            "speedup": round(same / theirs, 1) if theirs and same else None}


def _run_reference(variant: str, tickets: list[Ticket], total_seconds: float,
                   ticket_seconds: float) -> dict:
    """jira2markdown over ``tickets`` in a child process; a ticket over ``ticket_seconds``
    is recorded as timed out (the child is replaced), and the run stops at ``total_seconds``."""
    finished, timed_out, failed, position = {}, [], {}, 0
    deadline = time.monotonic() + total_seconds
    while position < len(tickets) and time.monotonic() < deadline:
        child, lines = _start_reference(variant, tickets[position:])
        try:
            while position < len(tickets):
                wait = min(ticket_seconds, deadline - time.monotonic())
                if wait <= 0:
                    break
                try:
                    key, seconds, outputs = json.loads(lines.get(timeout=wait))
                except Empty:
                    if time.monotonic() < deadline:
                        timed_out.append(tickets[position][0])
                        position += 1
                    break
                if isinstance(outputs, str):
                    failed[key] = outputs
                else:
                    finished[key] = (seconds, outputs)
                position += 1
        finally:
            child.kill()
            child.wait()
    return {"sampled": len(tickets), "finished": finished, "timed_out": timed_out,
            "failed": failed, "not_reached": len(tickets) - position}


def _start_reference(variant: str, tickets: list[Ticket]) -> tuple[subprocess.Popen, Queue]:
    """A child Python converting ``tickets`` with jira2markdown (a plain subprocess, so it
    imports nothing of the caller), and a queue of its result lines once it is ready."""
    code = f"from jarvis_bench.jira_markup import serve_reference; serve_reference({variant!r})"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, encoding="utf-8")
    lines: Queue = Queue()
    threading.Thread(target=_forward_lines, args=(child.stdout, lines), daemon=True).start()
    try:
        child.stdin.write(json.dumps(tickets))
        child.stdin.close()
    except BrokenPipeError:
        pass  # the child died at start: reported just below
    try:
        ready = lines.get(timeout=_STARTUP_SECONDS)
    except Empty:
        ready = ""
    if ready.strip() != '"ready"':
        child.kill()
        child.wait()
        raise RuntimeError(f"jira2markdown did not start in a child process (exit code "
                           f"{child.returncode}); is it installed in {sys.executable}?")
    return child, lines


def _forward_lines(stream, lines: Queue) -> None:
    for line in stream:
        lines.put(line)


def serve_reference(variant: str) -> None:
    """The child's side: tickets as JSON on stdin, then one JSON line on stdout per ticket:
    [key, seconds, markdown bodies] or [key, seconds, error text]."""
    tickets = json.load(sys.stdin)
    convert = _reference_converter(variant)
    print(json.dumps("ready"), flush=True)
    for key, bodies in tickets:
        started = time.perf_counter()
        try:
            outputs = [convert(body) for body in bodies]
        except Exception as exc:  # noqa: BLE001 - a grammar failure is a figure, not a crash
            outputs = f"{type(exc).__name__}: {exc}"
        print(json.dumps([key, time.perf_counter() - started, outputs]), flush=True)


def _reference_converter(variant: str) -> Callable[[str], str]:
    from jira2markdown import convert
    from jira2markdown.elements import MarkupElements
    from pyparsing import Forward

    if variant == "convert":
        return convert
    elements = MarkupElements()
    inline_markup, markup = Forward(), Forward()
    inline_markup <<= elements.expr(inline_markup, markup, {},
                                    [e for e in elements if e.is_inline_element])
    markup <<= elements.expr(inline_markup, markup, {}, elements)
    return markup.transform_string


def normalise(text: str) -> str:
    """Whitespace runs as one space, ends trimmed: what 'the same text' means here."""
    return " ".join(text.split())


def agreement(sources: dict[str, list[str]], reference: dict[str, tuple[float, list[str]]],
              ours: dict[str, list[str]]) -> dict:
    """Share of the reference's tickets whose every body agrees with ours, the share once the
    deliberate differences (every kind but 'other') are set aside, and the kinds of
    difference in the others (a ticket counts once under each kind it shows)."""
    agreeing, only_deliberate, kinds = 0, 0, {}
    for key, (_, theirs) in reference.items():
        differing = [(source, their, our) for source, their, our
                     in zip(sources[key], theirs, ours[key])
                     if normalise(their) != normalise(our)]
        if not differing:
            agreeing += 1
            continue
        seen = set()
        for source, their, our in differing:
            for kind in difference_kinds(source, their, our):
                if kind not in seen:
                    seen.add(kind)
                    kinds.setdefault(kind, {"tickets": 0, "example": _example(key, their, our)})
                    kinds[kind]["tickets"] += 1
        only_deliberate += "other" not in seen
    differences = [{"kind": kind, "tickets": entry["tickets"], "why": _WHY[kind],
                    "example": entry["example"]}
                   for kind, entry in sorted(kinds.items(), key=lambda item: -item[1]["tickets"])]
    compared = len(reference)
    return {"compared_tickets": compared, "agreeing_tickets": agreeing,
            "share": round(agreeing / compared, 4) if compared else None,
            "share_apart_from_deliberate_differences": round(
                (agreeing + only_deliberate) / compared, 4) if compared else None,
            "differences": differences}


# Each deliberate difference, as a rewrite that makes both sides read the same when that is
# the only difference; applied to both outputs in turn.
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(([^)\n]*)\)(\{[^}\n]*\})?")
_FILE_LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(\1\)")
_FONT = re.compile(r"<font color=\"[^\"]*\">|</font>")
_MENTION = re.compile(r"\[~([^\]\s]+)\]")
_WHITESPACE_ESCAPE = re.compile(r"\\[tnrf]")
_QUOTE_MARK = re.compile(r"^[ \t]*>", re.MULTILINE)
_JAVA_FENCE = re.compile(r"^(```+)Java$", re.MULTILINE)
_REWRITES: dict[str, Callable[[str], str]] = {
    "code label": lambda text: _JAVA_FENCE.sub(r"\1", text),
    "image": lambda text: _IMAGE.sub(
        lambda m: m.group(1) if m.group(1) == m.group(1).strip() else f"!{m.group(1)}!", text),
    "attachment": lambda text: _FILE_LINK.sub(r"\1", text),
    "color": lambda text: _FONT.sub("", text),
    "mention": lambda text: _MENTION.sub(r"@\1", text),
    "whitespace escapes": lambda text: _QUOTE_MARK.sub("", _WHITESPACE_ESCAPE.sub(" ", text)),
    "backslash escape": lambda text: text.replace("\\\\*", "\\*"),
}
_WHY = {
    "code label": "jira2markdown labels a {code} block without a language as Java; we leave "
                  "it unlabelled, or every ticket with code would match a search for 'java'",
    "image": "jira2markdown writes ![name](name), an image link to a file that is not in the "
             "export (and reads '! Thanks !' as an image); we keep the image's name",
    "attachment": "jira2markdown writes [^file] as [file](file), a link to a file that is not "
                  "in the export; we keep the file's name",
    "color": "jira2markdown keeps {color} as <font color=...> HTML; we keep only its text",
    "mention": "jira2markdown makes a mention only of names of letters, digits, : and -, and "
               "leaves [~john.doe] or [~me@x.com] as written; we write @john.doe for any name",
    "whitespace escapes": "jira2markdown turns \\t \\n \\r inside {{...}} and {quote} into real "
                          "whitespace (C:\\temp becomes C:<tab>emp, and a new quoted line); we "
                          "keep the text verbatim",
    "backslash escape": "a backslash escapes markup in Jira: we keep \\* (markdown's escape "
                        "of *); jira2markdown writes \\\\* (a backslash, then *)",
    "code block unconverted": "jira2markdown leaves a {code}/{noformat} block as written when "
                              "it starts inside a list item or [bracket] that ends before it",
    "line breaks": "the same text with a line break where the other has none: we put text "
                   "that follows a closing code fence on its own line, or markdown would not "
                   "read the fence as closing",
    "other": "other rule differences (see the example)",
}


def difference_kinds(source: str, theirs: str, ours: str) -> list[str]:
    """The kinds of difference between two renderings of ``source``: the deliberate rewrites
    that fire, plus 'other' when they do not explain it all (whitespace aside)."""
    kinds = []
    if ("{code" in theirs or "{noformat" in theirs) and not (
            "{code" in ours or "{noformat" in ours):
        kinds.append("code block unconverted")
    for kind, rewrite in _REWRITES.items():
        their_new, our_new = rewrite(theirs), rewrite(ours)
        if len(theirs) - len(their_new) != len(ours) - len(our_new):  # not the same on both
            kinds.append(kind)
        theirs, ours = their_new, our_new
    if "".join(theirs.split()) != "".join(ours.split()):
        if "code block unconverted" not in kinds:
            kinds.append("other")
    elif not kinds:
        kinds.append("line breaks")
    return kinds


def _example(key: str, theirs: str, ours: str) -> dict:
    """The first differing stretch of the two normalised texts, with some context."""
    theirs, ours = normalise(theirs), normalise(ours)
    start = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b),
                 min(len(theirs), len(ours)))
    begin = max(0, start - _EXAMPLE_CONTEXT // 2)
    return {"ticket": key, "jira2markdown": theirs[begin:start + _EXAMPLE_CONTEXT],
            "ours": ours[begin:start + _EXAMPLE_CONTEXT]}
