"""A generated corpus of the realistic mix, sized by a target chunk count, for
``jarvis bench scale``: vault notes with wikilinks and tags (``synthetic_vault``), GitHub
issues with comments citing notes, a git repository whose commits cite the issues
(``fixes scale#N``), and mail threads (replies by ``In-Reply-To``) naming the issues.

One *bundle* is a note, an issue with three comments, two commits and a three-message thread;
``CHUNKS_PER_BUNDLE`` is measured on a refresh of a generated corpus (see
docs/benchmarks.md), so ``bundles_for`` turns a target chunk count into a bundle count."""

from __future__ import annotations

import json
import random
import re
import subprocess
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

from jarvis_bench.embed import sentence
from jarvis_bench.synthetic_vault import write_vault

REPO_NAME = "scale"
COMMENTS_PER_ISSUE = 3
COMMITS_PER_BUNDLE = 2
MESSAGES_PER_THREAD = 3
CHUNKS_PER_BUNDLE = 15.0
_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def bundles_for(chunks: int) -> int:
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    return max(1, round(chunks / CHUNKS_PER_BUNDLE))


def _prose(rng: random.Random, sentences: tuple[int, int]) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(*sentences)))


def _issue(number: int, bundles: int, rng: random.Random) -> dict:
    when = _EPOCH + timedelta(hours=number)
    note = f"note-{rng.randrange(bundles):05d}"
    comments = [{"user": {"login": f"person{rng.randrange(50)}"},
                 "created_at": (when + timedelta(minutes=10 * (k + 1))).isoformat(),
                 "body": f"{_prose(rng, (2, 6))} See [[{note}]]."}
                for k in range(COMMENTS_PER_ISSUE)]
    return {"number": number, "title": f"Issue {number}: {sentence(rng)[:60]}",
            "body": _prose(rng, (4, 10)), "state": rng.choice(["open", "closed"]),
            "user": {"login": f"person{rng.randrange(50)}"}, "created_at": when.isoformat(),
            "updated_at": when.isoformat(),
            "html_url": f"https://github.com/bench/{REPO_NAME}/issues/{number}",
            "labels": [{"name": f"area-{rng.randrange(12)}"}], "comments": comments}


def write_tickets(path: Path, bundles: int, rng: random.Random) -> None:
    path.mkdir(parents=True, exist_ok=True)
    per_file = 1000
    for start in range(0, bundles, per_file):
        issues = [_issue(n + 1, bundles, rng) for n in range(start, min(bundles, start + per_file))]
        (path / f"issues-{start // per_file:04d}.json").write_text(json.dumps(issues))


def write_repository(path: Path, bundles: int, rng: random.Random) -> None:
    """A git repository of ``COMMITS_PER_BUNDLE * bundles`` commits (git fast-import), each
    changing one file and citing an issue."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    importer = subprocess.Popen(["git", "-C", str(path), "fast-import", "--quiet"],
                                stdin=subprocess.PIPE)
    with importer.stdin as stream:  # commit by commit: no size holds them all in memory
        for index in range(COMMITS_PER_BUNDLE * bundles):
            issue = rng.randrange(bundles) + 1
            message = (f"{sentence(rng)[:70]}\n\n{_prose(rng, (1, 3))}\n\n"
                       f"fixes {REPO_NAME}#{issue}\n")
            content = f"# Module {index % 200}\n\n{_prose(rng, (1, 2))}\n"
            stamp = int((_EPOCH + timedelta(minutes=index)).timestamp())
            data, body = message.encode(), content.encode()
            stream.write(b"commit refs/heads/main\n"
                         + f"committer Bench <bench@jarvis.invalid> {stamp} +0000\n".encode()
                         + f"data {len(data)}\n".encode() + data
                         + f"M 644 inline src/module-{index % 200:03d}.md\n".encode()
                         + f"data {len(body)}\n".encode() + body + b"\n")
    if importer.wait() != 0:
        raise subprocess.CalledProcessError(importer.returncode, importer.args)
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "main"], check=True)


def write_mail(path: Path, bundles: int, rng: random.Random) -> None:
    """One mbox of ``bundles`` threads of ``MESSAGES_PER_THREAD`` messages."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as mbox:
        for thread in range(bundles):
            issue = rng.randrange(bundles) + 1
            subject = f"Question about {REPO_NAME}#{issue}"
            parent = None
            for k in range(MESSAGES_PER_THREAD):
                message_id = f"<t{thread}.m{k}@bench.invalid>"
                when = _EPOCH + timedelta(hours=thread, minutes=k)
                headers = [f"From: person{rng.randrange(50)} <p{rng.randrange(50)}@bench.invalid>",
                           "To: team@bench.invalid", f"Subject: {'Re: ' if k else ''}{subject}",
                           f"Date: {format_datetime(when)}", f"Message-ID: {message_id}"]
                if parent:
                    headers += [f"In-Reply-To: {parent}", f"References: {parent}"]
                body = "\n\n".join(_prose(rng, (3, 6)) for _ in range(rng.randint(1, 3)))
                body = re.sub(r"^From ", ">From ", body, flags=re.MULTILINE)  # mboxrd quoting
                mbox.write(f"From bench@jarvis.invalid {when.strftime('%a %b %d %H:%M:%S %Y')}\n"
                           + "\n".join(headers) + f"\n\n{body}\n\n")
                parent = message_id


def write_corpus(root: Path, chunks: int, seed: int = 7,
                 embedding_backend: str | None = None) -> dict:
    """The corpus for about ``chunks`` chunks under ``root`` and a ``jarvis.yaml`` naming it
    (data in ``root/data``, the embedding backend when one is given); returns what was
    written. Each item goes to disk as it is made."""
    bundles = bundles_for(chunks)
    rng = random.Random(seed)
    write_vault(root / "vault", bundles, seed)
    write_tickets(root / "tickets", bundles, rng)
    write_repository(root / "repo", bundles, rng)
    write_mail(root / "mail" / "lists.mbox", bundles, rng)
    (root / "jarvis.yaml").write_text(
        f"data_dir: {root / 'data'}\nvaults:\n  notes: {root / 'vault'}\n"
        f"repos:\n  {REPO_NAME}: {root / 'repo'}\n"
        f"tickets:\n  issues:\n    path: {root / 'tickets'}\n    repo: {REPO_NAME}\n"
        f"mail:\n  lists: {root / 'mail' / 'lists.mbox'}\n"
        + (f"embedding:\n  backend: {embedding_backend}\n" if embedding_backend else ""))
    return {"bundles": bundles, "notes": bundles, "issues": bundles,
            "comments": COMMENTS_PER_ISSUE * bundles, "commits": COMMITS_PER_BUNDLE * bundles,
            "mail_messages": MESSAGES_PER_THREAD * bundles}
