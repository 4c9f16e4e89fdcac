"""Whether a repository's branch head moved since the published serving version, asked
without cloning (`git ls-remote` for a ``url:`` repository)."""

from __future__ import annotations

from pathlib import Path

from jarvis_core.sources.changes import published_rows
from jarvis_core.sources.kind import Change, ChangeWatch, Look, SourceUnreachable
from jarvis_core.sources.repo.git import GitError, open_repository, remote_head, resolve_head


def repository_head(repo) -> str:
    """The commit the repository's configured branch names now: ``git ls-remote`` for a
    ``url:`` repository (nothing is cloned to find out), else the local clone's ref."""
    if repo.url is not None:
        return remote_head(repo.url, repo.branch)
    return resolve_head(open_repository(repo.path), repo.branch)


def published_head(data_dir: Path, source: str) -> str | None:
    """The head last ingested and published for the repository; None when none is."""
    rows = published_rows(data_dir, "SELECT head FROM repo_state WHERE source = ?", [source])
    return rows[0][0] if rows else None


def _look(source: str, settings) -> Look:
    try:
        head = repository_head(settings)
    except GitError as exc:
        raise SourceUnreachable(str(exc)) from exc
    return Look(f"{source}-{head}", head)


def _compare(source: str, seen: Look, data_dir: Path) -> Change | None:
    head, previous = seen.state, published_head(data_dir, source)
    if previous is None:
        return Change("not published yet", {"jarvis/head": head}, first=True)
    if head == previous:
        return None
    return Change(f"head moved to {head[:12]}",
                  {"jarvis/head": head, "jarvis/previous_head": previous})


WATCH = ChangeWatch(_look, _compare, interval_seconds=60)
