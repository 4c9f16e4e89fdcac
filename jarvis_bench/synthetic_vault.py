"""A generated vault of the size and shape people have: notes of several sections of
English-like prose (about five chunks each), with frontmatter tags and wikilinks, in
folders; deterministic for a seed."""

from __future__ import annotations

import random
from pathlib import Path

from jarvis_bench.embed import sentence

NOTES_PER_FOLDER = 50


def _paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(3, 7)))


def note_text(index: int, notes: int, rng: random.Random) -> str:
    tags = sorted({f"topic-{rng.randrange(40):02d}" for _ in range(rng.randint(1, 3))})
    links = [f"[[note-{rng.randrange(notes):05d}]]" for _ in range(rng.randint(2, 5))]
    sections = []
    for number in range(rng.randint(3, 6)):
        paragraphs = "\n\n".join(_paragraph(rng) for _ in range(rng.randint(2, 3)))
        sections.append(f"## Part {number + 1}\n\n{paragraphs}")
    return (f"---\ntags: [{', '.join(tags)}]\n---\n# Note {index}\n\n"
            + "\n\n".join(sections) + f"\n\nSee also {', '.join(links)}.\n")


def write_vault(root: Path, notes: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for index in range(notes):
        folder = root / f"area-{index // (NOTES_PER_FOLDER * 20):02d}" / \
            f"topic-{index // NOTES_PER_FOLDER:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{index:05d}.md").write_text(note_text(index, notes, rng))
