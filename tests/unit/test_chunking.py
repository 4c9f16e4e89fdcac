"""Chunking against the real all-MiniLM-L6-v2 tokenizer: limits, headings, overlap, ids."""

import base64
import hashlib
import random
from pathlib import Path

import pytest

from jarvis_core.sources.tickets.export import read_ticket_set
from jarvis_core.stores.vectors.base import embedding_text
from jarvis_core.text.chunking import Chunk, chunk_document, chunk_id, context_header
from jarvis_core.text.tokens import TokenCounter, token_counter

DOC_KEY = "note:sample/Projects/Lumen/Ingest API.md"
JIRA_AC = Path(__file__).resolve().parents[1] / "data" / "jira-ac"  # two real Jira issues
WORDS = ("ingest retries backoff queue worker lease timeout idempotent payload schema "
         "vector index shard replica cursor batch window").split()


@pytest.fixture(scope="module")
def counter():
    return token_counter("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def small_counter():
    return token_counter("all-MiniLM-L6-v2", max_tokens=64)


def chunk(body, counter, title="Ingest API", doc_key=DOC_KEY, **kwargs) -> list[Chunk]:
    return chunk_document(body, title=title, doc_key=doc_key, counter=counter, **kwargs)


def assert_valid_chunks(chunks, body, counter, title="Ingest API"):
    """Every invariant a consumer relies on, checked with the real tokenizer."""
    assert chunks
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert [c.token_count for c in chunks] == counter.count([c.embed_text for c in chunks])
    covered = set()
    for c in chunks:
        assert c.token_count <= counter.max_tokens
        assert c.text.strip()
        assert c.text == body[c.char_start:c.char_end]
        assert c.embed_text == embedding_text(context_header(title, c.heading_path), c.text)
        covered.update(range(c.char_start, c.char_end))
    uncovered = [i for i, char in enumerate(body) if not char.isspace() and i not in covered]
    assert not uncovered, f"left out of every chunk: {body[uncovered[0]:uncovered[0] + 40]!r}"


def sentences(count, seed=0):
    rng = random.Random(seed)
    return " ".join(
        " ".join(rng.choice(WORDS) for _ in range(8)).capitalize() + "." for _ in range(count)
    )


def ids_in_section(chunks, heading_path):
    return [c.chunk_id for c in chunks if c.heading_path == heading_path]


def same_section_pairs(chunks):
    return [(a, b) for a, b in zip(chunks, chunks[1:]) if a.heading_path == b.heading_path]


def test_embedding_text_puts_title_and_headings_on_one_line():
    expected = "Ingest API > Retries\n\nbody"
    header = context_header("Ingest API", ("Ingest API", "Retries"))
    assert embedding_text(header, "body") == expected
    assert embedding_text(context_header("Ingest API", ("Retries",)), "body") == expected
    header = context_header("Lumen", ("Ingest API",))
    assert embedding_text(header, "body") == "Lumen > Ingest API\n\nbody"
    assert embedding_text(context_header("", ()), "body") == "body"
    assert embedding_text(context_header("Two\nlines", ()), "body") == "Two lines\n\nbody"


def test_chunk_id_follows_the_documented_formula():
    expected = hashlib.sha256(
        f"{DOC_KEY}\x1fIngest API > Retries\x1fsome text\x1f3".encode()
    ).hexdigest()[:32]
    assert chunk_id(DOC_KEY, ("Ingest API", "Retries"), "some text", 3) == expected


@pytest.mark.parametrize("body", ["", "   ", "\n\n\t \n", "\r\n"])
def test_blank_body_has_no_chunks(body, counter):
    assert chunk(body, counter) == []


def test_small_note_is_one_chunk_of_the_whole_body(counter):
    body = "\nFirst paragraph.\n\nSecond paragraph.\n\n- a list\n- of items\n\n"
    chunks = chunk(body, counter)
    assert len(chunks) == 1
    assert chunks[0].text == body.strip()
    assert chunks[0].heading_path == ()
    assert chunks[0].embed_text == "Ingest API\n\n" + body.strip()
    assert_valid_chunks(chunks, body, counter)


def test_heading_paths_follow_nested_and_setext_headings(counter):
    body = (
        "Preamble before any heading.\n\n"
        "# Ingest API\n\nOverview.\n\n"
        "## Retries\n\nRetry text.\n\n"
        "### Backoff\n\nBackoff text.\n\n"
        "## Limits\n\nLimits text.\n\n"
        "Storage **layer**\n=================\n\nStorage text.\n\n"
        "Sharding\n--------\n\nShard text.\n"
    )
    chunks = chunk(body, counter)
    assert [(c.heading_path, c.text) for c in chunks] == [
        ((), "Preamble before any heading."),
        (("Ingest API",), "# Ingest API\n\nOverview."),
        (("Ingest API", "Retries"), "## Retries\n\nRetry text."),
        (("Ingest API", "Retries", "Backoff"), "### Backoff\n\nBackoff text."),
        (("Ingest API", "Limits"), "## Limits\n\nLimits text."),
        (("Storage layer",), "Storage **layer**\n=================\n\nStorage text."),
        (("Storage layer", "Sharding"), "Sharding\n--------\n\nShard text."),
    ]
    assert chunks[2].embed_text == "Ingest API > Retries\n\n## Retries\n\nRetry text."
    assert_valid_chunks(chunks, body, counter)


def test_a_heading_with_nothing_under_it_joins_the_section_after_it(counter):
    # a real ticket of the AC export: facts, description, "## Comments", one comment
    ticket = read_ticket_set(JIRA_AC, "ac").tickets["AC-1188"]
    body = ticket["text"]
    chunks = chunk(body, counter, title=f"AC-1188 {ticket['summary']}", doc_key="ticket:AC-1188")
    assert [c.heading_path for c in chunks] == [(), ("Comments", "Aminul Islam 2015-11-03")]
    assert chunks[1].text.startswith("## Comments\n\n### Aminul Islam 2015-11-03\n\nHi ,")
    assert_valid_chunks(chunks, body, counter, title=f"AC-1188 {ticket['summary']}")
    # a note: empty headings join what follows them, a last one what precedes it
    body = "# Lumen\n\n## Design\n\n### Alerts\n\nRules per station.\n\n## Open questions\n"
    assert [(c.heading_path, c.text) for c in chunk(body, counter)] == [
        (("Lumen", "Design", "Alerts"), body.strip())]


def test_headings_share_a_chunk_with_their_text_when_it_is_cut(small_counter):
    # a comment holding a pasted log whose lines each nearly fill a chunk (AC-1413's shape)
    log = "\n".join(" ".join(WORDS[i % 5:i % 5 + 12] * 2) + f" line{i}" for i in range(6))
    body = f"## Comments\n\n### Andrey Tkachenko 2015-09-17\n\n```\n{log}\n```\n"
    chunks = chunk(body, small_counter, title="AC-1413")
    assert_valid_chunks(chunks, body, small_counter, title="AC-1413")
    # not the headings and the fence's first line alone: the log's first line, cut to fit
    assert chunks[0].text.startswith("## Comments\n\n### Andrey Tkachenko 2015-09-17\n\n"
                                     "```\ningest retries backoff")
    assert chunks[0].token_count > small_counter.max_tokens - 8


def test_hash_lines_inside_a_fence_are_not_headings(counter):
    body = "# Setup\n\n```bash\n# install the tools\npip install jarvis\n```\n\nAfter the fence.\n"
    chunks = chunk(body, counter)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ("Setup",)
    assert "# install the tools" in chunks[0].text
    assert_valid_chunks(chunks, body, counter)


def test_blocks_are_packed_whole(small_counter):
    paragraphs = [" ".join(WORDS[i:i + 6]) + f" item{i}." for i in range(12)]
    body = "\n\n".join(paragraphs)
    chunks = chunk(body, small_counter, overlap_tokens=0)
    assert len(chunks) > 1
    assert_valid_chunks(chunks, body, small_counter)
    for c in chunks:
        assert c.text.split("\n\n")[0] in paragraphs, "a chunk starts inside a paragraph"
        assert c.text.split("\n\n")[-1] in paragraphs, "a chunk ends inside a paragraph"
    assert all(len(c.text.split("\n\n")) > 1 for c in chunks[:-1]), "blocks were not packed"


def test_long_section_overlaps_consecutive_chunks(small_counter):
    body = "# Retries\n\n" + sentences(60)
    chunks = chunk(body, small_counter)
    assert len(chunks) > 3
    assert_valid_chunks(chunks, body, small_counter)
    for previous, current in same_section_pairs(chunks):
        assert current.char_start < previous.char_end
        shared = body[current.char_start:previous.char_end]
        assert previous.text.endswith(shared) and current.text.startswith(shared)
        assert 0 < small_counter.count([shared])[0] - 2 <= 32
        assert shared[0].isupper() and shared.endswith("."), "overlap should be whole sentences"


def test_overlap_zero_gives_disjoint_chunks(small_counter):
    body = "# Retries\n\n" + sentences(60)
    chunks = chunk(body, small_counter, overlap_tokens=0)
    assert len(chunks) > 3
    assert all(b.char_start >= a.char_end for a, b in zip(chunks, chunks[1:]))
    assert_valid_chunks(chunks, body, small_counter)


def test_no_overlap_across_sections(small_counter):
    body = "# First\n\n" + sentences(30, seed=1) + "\n\n# Second\n\n" + sentences(30, seed=2)
    chunks = chunk(body, small_counter)
    assert_valid_chunks(chunks, body, small_counter)
    boundaries = [(a, b) for a, b in zip(chunks, chunks[1:]) if a.heading_path != b.heading_path]
    assert len(boundaries) == 1
    last_of_first, first_of_second = boundaries[0]
    assert first_of_second.char_start >= last_of_first.char_end
    assert first_of_second.text.startswith("# Second")
    assert same_section_pairs(chunks) and all(
        b.char_start < a.char_end for a, b in same_section_pairs(chunks)
    )


def test_huge_paragraph_without_sentence_breaks(counter, small_counter):
    rng = random.Random(7)
    body = "# Dump\n\n" + " ".join(rng.choice(WORDS) for _ in range(3000))
    for each_counter in (counter, small_counter):
        chunks = chunk(body, each_counter)
        assert len(chunks) > 3
        assert_valid_chunks(chunks, body, each_counter)
        assert all(c.token_count > each_counter.max_tokens // 2 for c in chunks[:-1]), "underfilled"
        for c in chunks:
            assert c.char_end == len(body) or body[c.char_end] == " ", "window cut inside a word"


def test_huge_code_fence_splits_on_lines(small_counter):
    code = "\n".join(
        f"    result_{i} = compute(value_{i}, retries={i % 5})  # step {i}" for i in range(200)
    )
    body = f"# Code\n\n```python\n{code}\n```\n"
    chunks = chunk(body, small_counter)
    assert len(chunks) > 10
    assert_valid_chunks(chunks, body, small_counter)
    for c in chunks:
        assert c.char_start == 0 or body[c.char_start - 1] == "\n", "chunk starts mid-line"
        assert body[c.char_end] == "\n", "chunk ends mid-line"


def test_huge_table_splits_on_rows(small_counter):
    rows = "\n".join(f"| shard-{i} | replica {i % 3} | {i * 17} documents |" for i in range(300))
    body = f"# Shards\n\n| shard | replica | size |\n|---|---|---|\n{rows}\n\nAfter the table.\n"
    chunks = chunk(body, small_counter)
    assert len(chunks) > 10
    assert_valid_chunks(chunks, body, small_counter)
    for c in chunks:
        assert c.char_start == 0 or body[c.char_start - 1] == "\n"
        assert body[c.char_end] == "\n"


def test_very_long_single_word(small_counter, counter):
    blob = base64.b64encode(random.Random(3).randbytes(3750)).decode()
    assert len(blob) == 5000
    body = f"# Attachment\n\nInline data:\n\n{blob}\n\nDone.\n"
    for each_counter in (counter, small_counter):
        chunks = chunk(body, each_counter)
        assert len(chunks) > 3
        assert_valid_chunks(chunks, body, each_counter)


def test_long_heading_path_still_leaves_room_for_text(small_counter):
    long_heading = " ".join(f"word{i}" for i in range(80))
    body = f"# {long_heading}\n\n{sentences(10)}"
    chunks = chunk(body, small_counter, title="")
    assert all(c.token_count <= small_counter.max_tokens for c in chunks)
    assert [c.token_count for c in chunks] == small_counter.count([c.embed_text for c in chunks])
    assert all(c.text.strip() for c in chunks)
    assert all(c.heading_path == (long_heading,) for c in chunks)


class SuperAdditiveCounter:
    """The real tokenizer, but long texts cost extra, as joins can with other tokenizers."""

    def __init__(self, counter):
        self.counter = counter
        self.max_tokens = counter.max_tokens

    def count(self, texts):
        return [n + len(text) // 50 for n, text in zip(self.counter.count(texts), texts)]

    def offsets(self, text):
        return self.counter.offsets(text)


def test_chunks_are_recut_when_joined_text_counts_more_than_its_parts(small_counter):
    counter = SuperAdditiveCounter(small_counter)
    body = "# Retries\n\n" + sentences(40) + "\n\n" + "x" * 300 + "\n\n" + sentences(5, seed=4)
    chunks = chunk(body, counter)
    assert len(chunks) > 5
    assert_valid_chunks(chunks, body, counter)


def test_unicode_cjk_and_emoji(small_counter):
    cjk = "".join(f"数据管道第{i}步处理笔记和代码。" for i in range(60))
    emoji = " ".join(["🚀 launch ✅ done 👩‍💻 dev"] * 40)
    body = f"# 概要 🚀\n\n{cjk}\n\n## Emoji 😀\n\n{emoji}\n"
    chunks = chunk(body, small_counter)
    assert_valid_chunks(chunks, body, small_counter)
    assert {c.heading_path for c in chunks} == {("概要 🚀",), ("概要 🚀", "Emoji 😀")}
    cjk_chunks = [c for c in chunks if c.heading_path == ("概要 🚀",)]
    assert len(cjk_chunks) > 2
    assert all(c.text.endswith("。") for c in cjk_chunks), "CJK text should split after full stops"


def test_crlf_body_offsets_are_slices(small_counter):
    body = "# Title\r\n\r\nFirst para.\r\n\r\n## Sub\r\n\r\n" + sentences(20) + "\r\n"
    chunks = chunk(body, small_counter)
    assert_valid_chunks(chunks, body, small_counter)
    assert {c.heading_path for c in chunks} == {("Title",), ("Title", "Sub")}


def test_link_reference_definitions_are_kept(counter):
    body = ("[docs]: https://example.com/docs\n\n# Notes\n\nSee [docs].\n\n"
            "[spec]: https://example.com/spec\n")
    chunks = chunk(body, counter)
    assert_valid_chunks(chunks, body, counter)
    assert chunks[0].heading_path == () and "example.com/docs" in chunks[0].text


def test_ids_are_stable_and_local_to_the_edited_section(small_counter):
    body = (f"# A\n\n{sentences(20, seed=1)}\n\n# B\n\n{sentences(20, seed=2)}\n\n"
            "# C\n\nShort.\n")
    first = chunk(body, small_counter)
    assert [c.chunk_id for c in first] == [c.chunk_id for c in chunk(body, small_counter)]
    assert len({c.chunk_id for c in first}) == len(first)

    edited = body.replace("# B\n\n", "# B\n\nA new opening sentence. ")
    second = chunk(edited, small_counter)
    assert ids_in_section(second, ("A",)) == ids_in_section(first, ("A",))
    assert ids_in_section(second, ("C",)) == ids_in_section(first, ("C",))
    assert ids_in_section(second, ("B",))[0] not in ids_in_section(first, ("B",))

    prepended = chunk("# New\n\nInserted first.\n\n" + body, small_counter)
    assert {c.chunk_id for c in first} <= {c.chunk_id for c in prepended}, "ids depend on position"

    moved = chunk(body, small_counter, doc_key="note:sample/Other.md")
    assert not {c.chunk_id for c in moved} & {c.chunk_id for c in first}


def test_repeated_paragraphs_get_distinct_ids(small_counter):
    paragraph = ("Remember to rotate the ingest credentials, the queue tokens and the vector index "
                 "keys before the quarterly audit begins, and tell the on-call engineer when done.")
    assert 64 // 2 < small_counter.count([paragraph])[0] < 64 - 10  # one paragraph per chunk
    body = "# Notes\n\n" + "\n\n".join([paragraph] * 7) + "\n\n# Other\n\n" + paragraph
    chunks = chunk(body, small_counter, overlap_tokens=0)
    assert_valid_chunks(chunks, body, small_counter)
    under_notes = [c for c in chunks if c.heading_path == ("Notes",)]
    repeated_text = under_notes[1].text
    repeats = [c for c in under_notes if c.text == repeated_text]
    assert len(repeats) == 6
    assert [c.chunk_id for c in repeats] == [
        chunk_id(DOC_KEY, ("Notes",), repeated_text, occurrence) for occurrence in range(6)
    ]
    assert len({c.chunk_id for c in chunks}) == len(chunks)


class _CountingCounter(TokenCounter):
    """A token counter that adds up the characters it is asked to tokenize."""

    tokenized = 0

    def count(self, texts: list[str]) -> list[int]:
        _CountingCounter.tokenized += sum(map(len, texts))
        return super().count(texts)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        _CountingCounter.tokenized += len(text)
        return super().offsets(text)


def test_a_large_note_is_tokenized_a_few_times_over_not_once_per_candidate(counter):
    """Chunking's cost is its tokenizing: a 100 KB note is tokenized about 3.4 times over
    (measured, the same at 200 KB), where re-tokenizing each growing candidate would grow
    with the square of the note. Counted, not timed."""
    rng = random.Random(11)
    parts = []
    while sum(map(len, parts)) < 100_000:
        prose = sentences(rng.randint(5, 40), seed=len(parts))
        code = "\n".join(f"line {i}" for i in range(rng.randint(1, 60)))
        parts.append(f"## Section {len(parts)}\n\n{prose}\n\n```\n{code}\n```\n")
    body = "\n".join(parts)
    _CountingCounter.tokenized = 0
    chunks = chunk(body, _CountingCounter(counter.model_dir, counter.max_tokens))
    assert _CountingCounter.tokenized < 5 * len(body)
    assert_valid_chunks(chunks, body, counter)


def test_leading_spans_are_the_first_tokens_read_from_a_prefix(counter, monkeypatch):
    """A long text's first tokens come from a prefix cut at whitespace, grown while it holds
    too few (long single-token words here), never from the whole text."""
    text = "\n".join(f"- gauge {i} understanding the station's reading of 3.{i} mm"
                     for i in range(3000))
    whole = counter.offsets(text)
    tokenized = []
    offsets = TokenCounter.offsets
    monkeypatch.setattr(TokenCounter, "offsets",
                        lambda self, part: tokenized.append(len(part)) or offsets(self, part))
    for limit in (1, 25, 6500):
        assert counter.leading_spans(text, limit) == whole[:limit]
    assert max(tokenized) < len(text) / 4
    words = " ".join(["understanding"] * 2000)  # a token of 13 characters: prefixes grow
    every = offsets(counter, words)
    for limit in range(1, 40):  # and a cut within a word would end in a piece of it
        assert counter.leading_spans(words, limit) == every[:limit]
    assert counter.leading_spans("a few words", 100) == offsets(counter, "a few words")
