"""Behaviour of the Obsidian note parser on small, deliberately tricky notes."""

import json
import random
import time
from dataclasses import asdict

from jarvis_core.sources.vault.notes import parse_note
from jarvis_core.sources.vault.parsed_note import Heading, MarkdownLink, TypedRelation, WikiLink


def parse(text: str, path: str = "Projects/Lumen/Ingest API.md"):
    return parse_note(text, path=path)


def targets(links) -> list[str]:
    return [link.target for link in links]


# --- frontmatter -----------------------------------------------------------------------


def test_frontmatter_forms_and_title():
    note = parse(
        "---\n"
        "title: Ingest API v2\n"
        "tags: [Project/Lumen, '#API']\n"
        "aliases: Ingest, Ingest API\n"
        "created: 2024-01-05\n"
        "updated: 2024-02-01 10:30:00\n"
        "when: 2024-03-01T08:00:00Z\n"
        "---\n"
        "Body #inline\n"
    )
    assert note.title == "Ingest API v2"
    assert note.frontmatter_error is None
    assert note.tags == ["project/lumen", "api", "inline"]
    assert note.aliases == ["Ingest", "Ingest API"]
    assert note.frontmatter["created"] == "2024-01-05"
    assert note.frontmatter["when"] == "2024-03-01T08:00:00+00:00"
    assert note.created == "2024-01-05"
    assert note.modified == "2024-02-01T10:30:00"
    assert note.body == "Body #inline\n"
    assert note.body_start_line == 9
    json.dumps(asdict(note))


def test_tags_as_string_and_single_string_alias():
    note = parse("---\ntags: '#one, two #three/four/'\nalias: Only One\ntag: extra\n---\n")
    assert note.tags == ["one", "two", "three/four", "extra"]
    assert note.aliases == ["Only One"]


def test_alias_list_is_not_split_on_commas_and_is_deduplicated():
    note = parse("---\naliases:\n  - Smith, John\n  - ' Smith, John '\n  - JS\n---\n")
    assert note.aliases == ["Smith, John", "JS"]


def test_frontmatter_tags_that_could_not_be_written_inline_are_dropped():
    note = parse("---\ntags: [2024, c++, ok_tag]\n---\n")
    assert note.tags == ["ok_tag"]


def test_title_falls_back_to_file_stem():
    assert parse("---\ntitle: '  '\n---\n").title == "Ingest API"
    assert parse("---\ntitle: 42\n---\n").title == "Ingest API"
    assert parse("no frontmatter", path="Note.v2.md").title == "Note.v2"


def test_non_json_values_become_strings():
    note = parse(
        "---\nn: .nan\nbin: !!binary aGk=\n2024-01-01: dated\nnested: {d: 2024-01-02}\n---"
    )
    assert note.frontmatter == {
        "n": "nan",
        "bin": "b'hi'",
        "2024-01-01": "dated",
        "nested": {"d": "2024-01-02"},
    }
    json.dumps(note.frontmatter, allow_nan=False)


def test_invalid_yaml_reports_the_file_line_and_the_body_is_still_parsed():
    note = parse("---\ntitle: ok\nkey: value: other\n---\n# Heading\nText #tag [[Link]]\n")
    assert note.frontmatter == {}
    # libyaml adds "in this context", the pure-Python loader says "here"
    error = "invalid YAML frontmatter at line 3: mapping values are not allowed"
    assert note.frontmatter_error.startswith(error)
    assert note.title == "Ingest API"
    assert note.body == "# Heading\nText #tag [[Link]]\n"
    assert note.headings == [Heading(1, "Heading", 5)]
    assert note.tags == ["tag"]
    assert note.wikilinks == [WikiLink("Link", None, None, None, False, 6)]


def test_frontmatter_that_is_not_a_mapping_is_an_error():
    note = parse("---\n- a\n- b\n---\nbody\n")
    assert note.frontmatter == {}
    assert "expected a mapping" in note.frontmatter_error
    assert note.body == "body\n"


def test_impossible_date_is_an_error_not_an_exception():
    note = parse("---\ncreated: 2024-02-30\n---\n")
    assert note.frontmatter == {}
    assert note.frontmatter_error.startswith("invalid YAML frontmatter")


def test_frontmatter_alias_bomb_is_refused():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for name, previous in zip("bcdefg", "abcdef"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    note = parse("---\n" + "\n".join(lines) + "\n---\nbody")
    assert note.frontmatter == {}
    assert "too many" in note.frontmatter_error


def test_deeply_nested_frontmatter_does_not_crash():
    note = parse("---\n" + "[" * 50_000 + "]" * 50_000 + "\n---\nbody #tag")
    assert note.frontmatter == {}
    assert note.frontmatter_error.startswith("invalid YAML frontmatter")
    assert note.tags == ["tag"]


def test_no_closing_fence_means_no_frontmatter():
    text = "---\ntitle: Not frontmatter\n\nBody text\n"
    note = parse(text)
    assert note.frontmatter == {}
    assert note.frontmatter_error is None
    assert note.title == "Ingest API"
    assert note.body == text
    assert note.body_start_line == 1


def test_frontmatter_must_start_on_the_first_line():
    note = parse("\n---\ntitle: x\n---\n")
    assert note.frontmatter == {}
    assert note.body_start_line == 1


def test_dots_close_frontmatter_and_crlf_is_understood():
    note = parse("---\r\ntitle: Dots\r\n...\r\nBody #t\r\nline [[Two]]\r\n")
    assert note.title == "Dots"
    assert note.body_start_line == 4
    assert note.wikilinks[0].line == 5


def test_bom_is_ignored():
    note = parse("\ufeff---\ntitle: With BOM\n---\n#tag")
    assert note.title == "With BOM"
    assert note.tags == ["tag"]
    assert parse("\ufeff# Heading").headings == [Heading(1, "Heading", 1)]


def test_only_frontmatter():
    note = parse("---\ntitle: Just metadata\n---")
    assert note.title == "Just metadata"
    assert note.body == ""
    assert note.body_start_line == 4
    assert note.headings == note.wikilinks == note.links == []


def test_empty_text():
    note = parse("", path="Inbox/Empty.md")
    assert note.title == "Empty"
    assert note.frontmatter == {}
    assert note.body == ""
    assert note.body_start_line == 1
    assert note.tags == note.wikilinks == note.embeds == note.links == note.headings == []
    assert note.created is None and note.modified is None


def test_empty_frontmatter_is_not_an_error():
    note = parse("---\n---\nbody")
    assert note.frontmatter == {} and note.frontmatter_error is None
    assert note.body == "body"


def test_frontmatter_wikilinks_with_file_lines():
    note = parse(
        "---\n"
        "related:\n"
        "  - '[[Note A]]'\n"
        "  - \"[[Folder/Note B#Part|B]]\"\n"
        "up: '[[Lumen]]'\n"
        "cover: '![[cover.png]]'\n"
        "---\n"
        "Body [[Note A]]\n"
    )
    assert note.frontmatter_links == {
        "related": ["Note A", "Folder/Note B"],
        "up": ["Lumen"],
        "cover": ["cover.png"],
    }
    assert [(link.target, link.line) for link in note.wikilinks] == [
        ("Note A", 3),
        ("Folder/Note B", 4),
        ("Lumen", 5),
        ("Note A", 8),
    ]
    assert note.wikilinks[1] == WikiLink("Folder/Note B", "Part", None, "B", False, 4)
    assert note.embeds == [WikiLink("cover.png", None, None, None, True, 6)]


def test_frontmatter_links_repeat_per_key_and_lines_follow_document_order():
    note = parse("---\na: ['[[X]]', '[[X#h]]']\nb: '[[X]]'\n---\n")
    assert note.frontmatter_links == {"a": ["X"], "b": ["X"]}
    assert [link.line for link in note.wikilinks] == [2, 2, 3]


def test_created_prefers_frontmatter_then_daily_note_file_name():
    daily = "Daily/2024-03-15.md"
    assert parse("---\ndate: '2024-03-01T09:15'\n---\n", daily).created == "2024-03-01T09:15:00"
    assert parse("---\ncreated: last tuesday\n---\n", daily).created == "2024-03-15"
    assert parse("text", path="Journal/2023-12-31 Sunday.md").created == "2023-12-31"
    assert parse("text", path="2024-02-30.md").created is None
    assert parse("text", path="2024-03/Notes.md").created is None
    assert parse("---\nmodified: 2024-05-06\n---\n").modified == "2024-05-06"


# --- tags ------------------------------------------------------------------------------


def test_inline_tags_nested_unicode_and_canonical():
    note = parse("Go #Project/Lumen/ and #Café #日本語 (#paren) #snake_case-tag #MIXED #mixed")
    assert note.tags == ["project/lumen", "café", "日本語", "paren", "snake_case-tag", "mixed"]


def test_tags_with_combining_marks_are_kept_whole_and_nfc():
    note = parse("#cafe\u0301 #हिन्दी")
    assert note.tags == ["caf\u00e9", "हिन्दी"]


def test_things_that_are_not_tags():
    note = parse(
        "# Heading\n"
        "Issue #123 and C#sharp and https://x.com/a#frag and [link](https://x.com/#anchor) "
        "and `#code` and \\#escaped and [[Note#Heading]] and #/ and ## double\n"
        "\n"
        "```\n#fenced\n```\n"
        "\n"
        "    #indented\n"
    )
    assert note.tags == []


def test_tag_in_heading_text_and_in_table_and_after_emphasis():
    note = parse("## Plan #todo\n\n| a |\n|---|\n| #cell |\n\n**#urgent** and *#soon*\n")
    assert note.tags == ["todo", "cell", "urgent", "soon"]
    assert note.headings == [Heading(2, "Plan #todo", 1)]


def test_tag_lines_give_each_canonical_tag_its_file_lines():
    note = parse(
        "---\n"
        "title: T\n"
        "tags:\n"
        "  - Lumen\n"
        "  - area/health\n"
        "tag: extra\n"
        "---\n"
        "Intro #lumen and #LUMEN again\n"
        "\n"
        "A paragraph over\n"
        "two lines #area/health\n"
        "\n"
        "| a |\n|---|\n| #cell |\n"
        "\n"
        "- item #cafe\u0301\n"
        "- `#code` #Café\n"
    )
    assert note.tag_lines == {"lumen": [3, 8], "area/health": [3, 11], "extra": [6],
                              "cell": [15], "café": [17, 18]}
    assert note.tags == list(note.tag_lines)


def test_tag_lines_of_flow_and_string_forms_point_at_the_key():
    note = parse("---\ncreated: 2024-01-01\ntags: [a, b]\n---\n#c")
    assert note.tag_lines == {"a": [3], "b": [3], "c": [5]}
    note = parse("---\r\n'tags': 'x, y'\r\n---\r\nbody\r\n\r\n#z\r\n")
    assert note.tag_lines == {"x": [2], "y": [2], "z": [6]}
    assert parse("no frontmatter\n\n#only").tag_lines == {"only": [3]}


# --- wikilinks and embeds --------------------------------------------------------------


def test_wikilink_parts():
    note = parse(
        "[[Folder/Note#Heading|Alias]] [[ Note | spaced ]] [[Note#^block-1]] "
        "[[#Local Heading]] [[#^local-block]] [[Note.md]] [[A|b|c]]\n"
    )
    assert note.wikilinks == [
        WikiLink("Folder/Note", "Heading", None, "Alias", False, 1),
        WikiLink("Note", None, None, "spaced", False, 1),
        WikiLink("Note", None, "block-1", None, False, 1),
        WikiLink("", "Local Heading", None, None, False, 1),
        WikiLink("", None, "local-block", None, False, 1),
        WikiLink("Note.md", None, None, None, False, 1),
        WikiLink("A", None, None, "b|c", False, 1),
    ]


def test_escaped_pipe_in_table_cell_and_outside_tables():
    note = parse("| Link | Other |\n|---|---|\n| [[Note\\|alias]] | [[Plain]] |\n\n[[Out\\|side]]")
    assert note.wikilinks == [
        WikiLink("Note", None, None, "alias", False, 3),
        WikiLink("Plain", None, None, None, False, 3),
        WikiLink("Out", None, None, "side", False, 5),
    ]


def test_embeds():
    note = parse("![[image.png]]\n![[Other Note#Section]] and ![[diagram.svg|300]]\n")
    assert note.embeds == [
        WikiLink("image.png", None, None, None, True, 1),
        WikiLink("Other Note", "Section", None, None, True, 2),
        WikiLink("diagram.svg", None, None, "300", True, 2),
    ]
    assert note.wikilinks == []


def test_links_inside_code_are_ignored():
    note = parse(
        "Inline `[[Code]] ![[code.png]] [x](y)` span.\n"
        "\n"
        "```md\n[[Fenced]] ![[fenced.png]] https://fenced.example\n```\n"
        "\n"
        "    [[Indented]] https://indented.example\n"
        "\n"
        "~~~\n[[Unclosed fence]]\n"
    )
    assert note.wikilinks == note.embeds == note.links == []


def test_wikilink_line_numbers_count_frontmatter_and_paragraph_lines():
    note = parse("---\na: 1\n---\nfirst\nsecond [[Two]]\n> quoted\n> [[Three]]\n- item\n  [[Four]]")
    lines = [(link.target, link.line) for link in note.wikilinks]
    assert lines == [("Two", 5), ("Three", 7), ("Four", 9)]


def test_wikilink_wins_over_a_commonmark_link_around_it():
    note = parse("[[Note]](Other.md)")
    assert targets(note.wikilinks) == ["Note"]
    assert note.links == []


def test_not_wikilinks():
    note = parse("[[]] [[ ]] [[#]] [[a\nb]] \\[[escaped]] [[a]b]]")
    assert note.wikilinks == []


# --- markdown links --------------------------------------------------------------------


def test_markdown_links_images_autolinks_and_bare_urls():
    note = parse(
        "A [text **bold** `code`](Notes/Other%20Note.md \"title\") and ![alt text](img/pic.png)\n"
        "auto <https://auto.example/x> bare https://bare.example/p?q=1#frag.\n"
        "[spaces](<My Note.md>) [file](file:///tmp/x.txt) [[Wiki]]\n"
    )
    assert note.links == [
        MarkdownLink("Notes/Other%20Note.md", "text bold code", 1, False, False),
        MarkdownLink("img/pic.png", "alt text", 1, True, False),
        MarkdownLink("https://auto.example/x", "", 2, False, True),
        MarkdownLink("https://bare.example/p?q=1#frag", "", 2, False, True),
        MarkdownLink("My Note.md", "spaces", 3, False, False),
        MarkdownLink("file:///tmp/x.txt", "file", 3, False, False),
    ]
    assert targets(note.wikilinks) == ["Wiki"]


def test_file_names_are_not_bare_links():
    assert parse("See README.md, setup.py and www.example.com").links == []


def test_link_lines_do_not_come_from_earlier_matching_text():
    note = parse("docs alt\nsee [docs](https://docs.example) ![alt](a.png)\n")
    assert [(link.text, link.line) for link in note.links] == [("docs", 2), ("alt", 2)]


def test_link_text_across_lines_and_no_wikilinks_or_tags_inside_it():
    note = parse("[see [[A]] and #tag\non two lines](https://x.example)")
    text = "see [[A]] and #tag on two lines"
    assert note.links == [MarkdownLink("https://x.example", text, 1, False, False)]
    assert note.wikilinks == [] and note.tags == []


def test_link_found_after_inline_parsing_gets_its_line():
    note = parse("first\nsecond mailto:someone@example.org\n")
    assert note.links == [MarkdownLink("mailto:someone@example.org", "", 2, False, True)]


def test_reference_links_and_images_inside_links():
    note = parse("[![badge](badge.svg)](https://ci.example)\n\n[ref link][r]\n\n[r]: https://ref.x")
    assert note.links == [
        MarkdownLink("badge.svg", "badge", 1, True, False),
        MarkdownLink("https://ci.example", "", 1, False, False),
        MarkdownLink("https://ref.x", "ref link", 3, False, False),
    ]


# --- headings --------------------------------------------------------------------------


def test_atx_and_setext_headings_with_lines():
    note = parse(
        "---\ntitle: t\n---\n"
        "# One ##\n"
        "text\n"
        "###### Six ######\n"
        "Setext One\n"
        "==========\n"
        "Setext Two\n"
        "----------\n"
        "####### not a heading\n"
        "#not a heading either\n"
    )
    assert note.headings == [
        Heading(1, "One", 4),
        Heading(6, "Six", 6),
        Heading(1, "Setext One", 7),
        Heading(2, "Setext Two", 9),
    ]


# --- block ids -------------------------------------------------------------------------


def test_block_ids():
    note = parse(
        "A paragraph ^para-1\n"
        "\n"
        "- list item ^item-2\n"
        "- other item\n"
        "\n"
        "| a |\n|---|\n| b |\n"
        "\n"
        "^table-3\n"
        "\n"
        "no space^nope and `code ^nope2`\n"
        "\n"
        "## Heading ^nope3\n"
        "\n"
        "```\ncode ^nope4\n```\n"
        "\n"
        "mid ^nope5 paragraph\n"
    )
    assert note.block_ids == ["para-1", "item-2", "table-3"]


# --- typed relations -------------------------------------------------------------------


def test_typed_relation_forms():
    note = parse(
        "[[A]]|DEPENDS_ON|[[B]]\n"
        "[[C]] | uses | [[D]]\n"
        "[[E]]->PART_OF->[[F]]\n"
        "[[G|gee]] -> owns -> [[H#Part]]\n"
        "[[I]] -[BLOCKS]-> [[J]]\n"
        "[[K]]-[relates_to2]->[[L]]\n"
    )
    assert note.relations == [
        TypedRelation("A", "DEPENDS_ON", "B", 1),
        TypedRelation("C", "USES", "D", 2),
        TypedRelation("E", "PART_OF", "F", 3),
        TypedRelation("G", "OWNS", "H", 4),
        TypedRelation("I", "BLOCKS", "J", 5),
        TypedRelation("K", "RELATES_TO2", "L", 6),
    ]
    assert targets(note.wikilinks) == list("ABCDEFGHIJKL")


def test_this_means_the_note_itself_and_chains():
    note = parse(
        "this->IMPLEMENTS->[[Spec]]\n[[Team]] -[OWNS]-> This.\n[[X]]->USES->[[Y]]->USES->[[Z]]"
    )
    assert note.relations == [
        TypedRelation("", "IMPLEMENTS", "Spec", 1),
        TypedRelation("Team", "OWNS", "", 2),
        TypedRelation("X", "USES", "Y", 3),
        TypedRelation("Y", "USES", "Z", 3),
    ]


def test_not_relations():
    note = parse(
        "`[[A]]|USES|[[B]]`\n\n"
        "[[A]] | not a relation | [[B]]\n"
        "[[A]]->1ST->[[B]]\n"
        "this->USES->this\n"
        "[[A]]->USES->\n[[B]]\n"
        "![[A]]->USES->[[B]]\n"
        "mythis->USES->[[B]]\n"
    )
    assert note.relations == []


def test_frontmatter_relationships():
    note = parse(
        "---\n"
        "relationships:\n"
        "  - depends_on [[Auth Service]]\n"
        "  - '[[Ingest]] PART_OF [[Lumen]]'\n"
        "  - '[[Owner]] OWNS this'\n"
        "  - this SAME_AS this\n"
        "  - not a relation\n"
        "---\n"
        "[[A]]|USES|[[B]]\n"
    )
    assert note.relations == [
        TypedRelation("", "DEPENDS_ON", "Auth Service", 0),
        TypedRelation("Ingest", "PART_OF", "Lumen", 0),
        TypedRelation("Owner", "OWNS", "", 0),
        TypedRelation("A", "USES", "B", 9),
    ]
    assert targets(note.wikilinks)[:4] == ["Auth Service", "Ingest", "Lumen", "Owner"]


# --- robustness ------------------------------------------------------------------------


def test_random_input_never_raises():
    rng = random.Random(20240105)
    alphabet = "[]()!#|^`*_~\\<>-:/.=\n\r\t \x00\ufeff\u200b\u0301abcXYZ09é日\U0001f600\"'{}&;"
    snippets = ["---\n", "...\n", "[[", "]]", "![[", "```", "    ", "> ", "- ", "1. ", "#t", "^id"]
    snippets += ["| a | b |\n|---|---|\n", "https://x.y/", "->", "|REL|", "this", "key: [", "\\|"]
    for _ in range(400):
        pieces = [
            rng.choice(snippets) if rng.random() < 0.2 else rng.choice(alphabet)
            for _ in range(rng.randint(0, 300))
        ]
        note = parse("".join(pieces))
        json.dumps(asdict(note))


def test_pathological_input_never_raises():
    texts = ["[" * 5000, "[[a|" * 2000, "> " * 5000, "- " * 5000, "*" * 5000 + "#x"]
    texts += ["\x00\x01\x02" * 1000, "---\n" + "- " * 5000 + "x\n---\n", "a" * 1_000_000]
    for text in texts:
        parse(text)


def test_a_100_kb_prose_note_parses_quickly():
    rng = random.Random(7)
    words = "notes feed a local knowledge base where every chunk keeps its heading path".split()
    paragraphs = []
    for index in range(400):
        sentence = " ".join(rng.choice(words) for _ in range(40))
        paragraphs.append(f"{sentence} [[Note {index}]] #t{index % 9} https://example.com/{index}")
    text = "\n\n".join(paragraphs)
    assert len(text) > 100_000
    parse(text)
    started = time.thread_time()  # this thread's CPU: neither other workers' load nor the
    note = parse(text)              # threads earlier tests left in this worker count
    assert time.thread_time() - started < 0.5  # ~50 ms on a laptop; generous for shared CI
    assert len(note.wikilinks) == 400 and len(note.links) == 400 and len(note.tags) == 9
