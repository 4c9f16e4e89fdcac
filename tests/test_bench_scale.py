"""The scale benchmark's corpus generator (the mix and its links) and one measured size."""

from __future__ import annotations

import json
import mailbox
import random
import re
import subprocess

from jarvis_bench.scale import run_scale_benchmark
from jarvis_bench.scale_corpus import CHUNKS_PER_BUNDLE, bundles_for, write_corpus, write_mail


def test_the_corpus_mixes_linked_notes_issues_citing_commits_and_mail_threads(tmp_path):
    written = write_corpus(tmp_path, chunks=round(4 * CHUNKS_PER_BUNDLE))
    assert written["bundles"] == bundles_for(round(4 * CHUNKS_PER_BUNDLE)) == 4
    notes = sorted((tmp_path / "vault").rglob("*.md"))
    assert len(notes) == 4
    assert all(re.search(r"\[\[note-\d{5}\]\]", note.read_text()) for note in notes)
    issues = [issue for path in (tmp_path / "tickets").glob("*.json")
              for issue in json.loads(path.read_text())]
    assert [issue["number"] for issue in issues] == [1, 2, 3, 4]
    assert all(len(issue["comments"]) == 3 for issue in issues)
    log = subprocess.run(["git", "-C", str(tmp_path / "repo"), "log", "--format=%B%x00"],
                         capture_output=True, text=True, check=True).stdout
    commits = [message for message in log.split("\0") if message.strip()]
    assert len(commits) == 8
    cited = [int(n) for message in commits for n in re.findall(r"fixes scale#(\d+)", message)]
    assert len(cited) == 8 and set(cited) <= {1, 2, 3, 4}
    messages = list(mailbox.mbox(tmp_path / "mail" / "lists.mbox"))
    assert len(messages) == 12
    ids = {message["Message-ID"] for message in messages}
    replies = [message for message in messages if message["In-Reply-To"]]
    assert len(replies) == 8 and all(reply["In-Reply-To"] in ids for reply in replies)
    assert "repo: scale" in (tmp_path / "jarvis.yaml").read_text()


def test_mail_bodies_never_split_the_mbox(tmp_path):
    """About one generated sentence in a hundred starts with "From": quoted, it stays body."""
    write_mail(tmp_path / "many.mbox", 300, random.Random(1))
    assert len(mailbox.mbox(tmp_path / "many.mbox")) == 900


def test_a_scale_row_measures_the_first_and_the_noop_refresh(tmp_path):
    result = run_scale_benchmark((20,), tmp_path, tmp_path / "scale.svg")
    row, = result["sizes"]
    assert row["chunks"] > 0 and row["target_chunks"] == 20
    assert row["peak_rss_mb"] > 100  # a Python process with the embedder loaded, from wait4
    assert 0 < row["noop_seconds"] < row["wall_seconds"]
    assert row["stores_mb"]["jarvis.duckdb"] > 0
    assert result["embedder"] == "configured"
    assert "<polyline" in (tmp_path / "scale.svg").read_text()
