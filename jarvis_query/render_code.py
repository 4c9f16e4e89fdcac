"""Readable text of the code answers (get-symbol, search-code), the same in the terminal and
in the MCP tools' text content: each item with the vault and path `read` opens it by."""

from __future__ import annotations

from jarvis_query.render import embeddings_lines

_CODE_LISTS = (("callers", "callers"), ("callees", "callees"), ("bases", "base types"),
               ("derived", "derived types"))


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def _opened_by(item: dict) -> str:
    return f"  [{item['vault']}/{item['path']}]" if item.get("path") else ""


def _place(match: dict) -> str:
    return f"{match['file']}:{match['start_line']}-{match['end_line']}"


def _match_line(match: dict) -> str:
    return (f"  {match['vault']}  {_place(match)}  {match['kind']} {match['qualified_name']}"
            f"  {_one_line(match['signature'])}")


def _code_line(item: dict) -> str:
    site = f"{item['file']}:{item['line']}" if item["file"] else "?"
    return f"  {item['title']}  at {site}  ({item['confidence']}){_opened_by(item)}"


def _heading(data: dict, name: str, title: str) -> str:
    shown, total = len(data[name]), data["counts"][name]
    return f"{title} ({total}" + (f", first {shown} shown" if total > shown else "") + "):"


def _story_lines(data: dict) -> list[str]:
    by = {"symbol": "commits that changed it",
          "file": "commits that changed its file (none is recorded for the symbol itself)",
          None: "commits that changed it"}[data["commits_by"]]
    lines = ["", _heading(data, "commits", by)]
    lines += [f"  {(c['committed_at'] or '')[:10]}  {c['title']}{_opened_by(c)}"
              for c in data["commits"]] or ["  none"]
    lines += ["", _heading(data, "tickets", "tickets those commits cite")]
    lines += [f"  {t['title']}  ({'/'.join(t['relations'])} by "
              + ", ".join(c["key"].rsplit("/", 1)[-1][:7] for c in t["commits"])
              + f"){_opened_by(t)}" for t in data["tickets"]] or ["  none"]
    lines += ["", _heading(data, "mentions", "mentioned in")]
    for item in data["mentions"]:
        lines.append(f"  {item['source_type']} {item['title']}{_opened_by(item)}")
        if item["evidence_text"]:
            lines.append(f"      {_one_line(item['evidence_text'])[:200]}")
    return lines if data["mentions"] else [*lines, "  none"]


def render_symbol(data: dict) -> str:
    """The symbols a name matches, or the one it names: its definition and code, callers
    and callees with the line of each call, types, and story."""
    symbol = data["symbol"]
    if symbol is None:
        return "\n".join([f"'{data['name']}' names {len(data['matches'])} symbols: give its "
                          "qualified name, path:line or the repository", *map(
                              _match_line, data["matches"])])
    lines = [f"# {symbol['qualified_name']}  ({symbol['kind']}, {symbol['language']}, "
             f"{symbol['vault']}/{_place(symbol)})", f"key: {symbol['key']}",
             f"read: {symbol['vault']}/{symbol['path']}"]
    if symbol["parent"]:
        lines.append(f"in: {symbol['parent']}")
    if symbol["doc"]:
        lines.append(f"doc: {_one_line(symbol['doc'])}")
    lines += ["", symbol["code"].rstrip()]
    empty = [title for name, title in _CODE_LISTS if not data[name]]
    for name, title in _CODE_LISTS:
        if data[name]:
            lines += ["", _heading(data, name, title), *map(_code_line, data[name])]
    if empty:
        lines += ["", f"no {', no '.join(empty)}"]
    if data["ambiguous_calls"]:
        lines += ["", _heading(data, "ambiguous_calls",
                               "calls that may mean it (the name has several definitions)")]
        lines += [f"  {call['file']}:{call['line']}  {call['written']}  "
                  f"({call['candidates']} candidates)" for call in data["ambiguous_calls"]]
    return "\n".join(lines + _story_lines(data))


def render_code_results(data: dict) -> str:
    """Code hits, best first: ``path:start-end  qualified_name  signature``, the repository
    it is in and the name the query gave it."""
    results, query = data["results"], data.get("query", "")
    if not results:
        return "\n".join([*embeddings_lines(data), f"no code found for {query!r}"])
    lines = [*embeddings_lines(data),
             f"{len(results)} symbol{'' if len(results) == 1 else 's'} for {query!r}"]
    for rank, hit in enumerate(results, 1):
        named = f"  [named: {hit['identifier']}]" if hit.get("identifier") else ""
        place = _place(hit) if hit["file"] else hit["path"]
        lines.append(f"{rank:>2}. {place}  {hit['qualified_name'] or hit['title']}  "
                     f"{_one_line(hit['signature'])}  ({hit['vault']}){named}")
    return "\n".join(lines)
