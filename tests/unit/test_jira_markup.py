"""Jira wiki markup to markdown in linear time, and Atlassian Document Format to text."""

import dataclasses
import sys

import pytest
from jira2markdown.elements import MarkupElements
from pyparsing import Forward

from jarvis_core.sources.tickets.markup import MarkupResult, adf_to_text, jira_to_markdown


def markdown(text: str) -> str:
    result = jira_to_markdown(text, budget_seconds=60)
    assert result.warning is None
    return result.markdown


def normalise(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def convert():
    """jira2markdown's grammar built once (its ``convert`` builds it on every call, 0.2 s)."""
    elements = MarkupElements()
    inline_markup, markup = Forward(), Forward()
    inline_markup <<= elements.expr(inline_markup, markup, {},
                                    [e for e in elements if e.is_inline_element])
    markup <<= elements.expr(inline_markup, markup, {}, elements)
    return markup.transform_string


@pytest.mark.parametrize(("wiki", "expected"), [
    ("h1. Title", "# Title"),
    ("  h3. A *bold* title", "### A **bold** title"),
    ("*bold* _italic_ -strike- +under+ ^sup^ ~sub~ ??cite??",
     "**bold** _italic_ ~~strike~~ <u>under</u> <sup>sup</sup> <sub>sub</sub> <q>cite</q>"),
    ("2 * 3 = 6, a*b", "2 \\* 3 = 6, a\\*b"),
    ("*a **b* c*", "\\*a \\***b** c\\*"),  # as jira2markdown pairs them
    ("*one**two*", "**one** **two**"),
    ("use {{a*b*c [x]}} here", "use `a*b*c [x]` here"),
    ("{{C:\\temp\\new}}", "`C:\\temp\\new`"),
    ("line\\\\break", "line\nbreak"),
    ("a -- b --- c --verbose", "a \u2013 b \u2014 c --verbose"),
    ("\\*not bold\\* and \\-not struck-", "\\*not bold\\* and \\-not struck-"),
    ("see http://x.com/a*b*c_d -here-", "see http://x.com/a*b*c_d ~~here~~"),
    ("[Jarvis|https://example.com/a-b]", "[Jarvis](https://example.com/a-b)"),
    ("[https://example.com] [www.example.com]",
     "<https://example.com> <https://www.example.com>"),
    ("[AC-12] and [*Notes*|Some Page]", "[AC-12] and [**Notes**\\|Some Page]"),
    ("[mailto:a@b.com] [Mail me|mailto:a@b.com]", "<a@b.com> [Mail me](mailto:a@b.com)"),
    ("Hi [~bob], ask [Ann|~ann] or [~accountid:5b10ac8d]", "Hi @bob, ask @ann or @5b10ac8d"),
    ("x[~bob]y", "x @bob y"),
    ("thanks [~john.doe] and [~me@example.com]", "thanks @john.doe and @me@example.com"),
    ("see !screen shot.png! and !a.png|thumbnail! !b.png|width=300,height=20!",
     "see screen shot.png and a.png b.png"),
    ("Great! Thanks! ! Not an image !", "Great! Thanks! ! Not an image !"),
    ("log in [^crash log.txt]", "log in crash log.txt"),
    ("{color:red}alert{color} and {color:#00ff00}*ok*{color}", "alert and **ok**"),
    ("h1. T\r\n*b*\r\n", "# T\n**b**"),
])
def test_inline_and_line_constructs(wiki, expected):
    assert markdown(wiki) == expected


def test_code_blocks_are_fenced_and_verbatim():
    assert markdown("{code:java}\nint a = *b* + [c|d];\n{code}") == (
        "```java\nint a = *b* + [c|d];\n```")
    assert markdown("{code:title=A.java|borderStyle=solid}\nx\n{code}") == "```\nx\n```"
    assert markdown("{noformat}\n*raw* {{x}}\n{noformat}") == "```\n*raw* {{x}}\n```"
    assert markdown("{code}a ``` b{code}") == "````\na ``` b\n````"


def test_blocks_inside_a_line_get_lines_of_their_own():
    assert markdown("see {code}x{code}, then") == "see \n```\nx\n```\n, then"
    assert markdown("{quote}said *this*{quote}\nnext") == "> said **this**\n\nnext"


def test_unclosed_macros_stay_text():
    assert markdown("{code} never closed *b*") == "{code} never closed **b**"
    assert markdown("{quote} open") == "{quote} open"


def test_quotes_and_panels():
    assert markdown("{quote}\n  first\n  *second*\n{quote}") == "> first\n> **second**"
    assert markdown("bq. cited\nbq. again\nafter") == "> cited\n> again\n\nafter"
    assert markdown("{panel:title=Note|borderStyle=dashed}\nbody *b*\n{panel}") == (
        "**Note**\nbody **b**")
    assert markdown("{quote}\n{noformat}\nat x()\n{noformat}\n{quote}") == (
        "> ```\n> at x()\n> ```")


def test_lists():
    assert markdown("* a\n** b\n* c") == "- a\n  - b\n- c"
    assert markdown("- a\n-- b") == "- a\n  - b"
    assert markdown("# one\n## two\n# three") == "1. one\n   1. two\n1. three"
    assert markdown("# step\n#* note") == "1. step\n   - note"
    assert markdown("* a\ncontinued *here*\n\nafter") == "- a\n  continued **here**\n\nafter"
    assert markdown("** not a list start") == "\\*\\* not a list start"


def test_tables():
    assert markdown("||h1||h2||\n|a|b|") == "|h1|h2|\n|---|---|\n|a|b|"
    assert markdown("|[x|http://y.com]|!i.png|thumbnail!|\n|c|d\nmore|") == (
        "|[x](http://y.com)|i.png|\n|---|---|\n|c|d<br>more|")
    assert markdown("||a||\n|1|2|") == "|a||\n|---|---|\n|1|2|"


def test_rule_keeps_the_line_above_a_paragraph():
    assert markdown("text\n----\nmore") == "text\n\n----\n\nmore"


@pytest.mark.parametrize("wiki", [
    "h2. Steps to reproduce\n# Open the app\n# Tap *Save*\n#* it crashes\n\n{code:javascript}\n"
    "var x = a * b;\n{code}\n\n||Platform||Result||\n|iOS|fails|\n"
    "|Android|works [see|http://example.com/a-b]|\n\nThanks [~jdoe], see the log.",
    "*Environment*:\n* Titanium SDK 5.4.0\n* iOS 9.3 -- simulator\n** iPhone 6s\n\n"
    "bq. It _used_ to work with -5.2- 5.3\n"
    "Run {{appc run -p ios --log-level trace}} and check http://docs.example.com/x_y*z",
    "{quote}\nError: *failed*\n{noformat}\nat foo (bar.js:1:2)\n{noformat}\n{quote}\n"
    "after ^1^ and ~2~ and +new+ ??ref??",
    "a [link|https://x.com/?a=1&b=2] and [mailto:x@y.com] and [Mail|mailto:x@y.com]\n"
    "Some text\\\\next line, *a **b* c* and 3 * 4",
    "h3. Notes\r\n\r\n* first -- with a [link|http://a.com]\r\n* second\r\n\r\n"
    "{code:xml}\r\n<a href=\"x\">*</a>\r\n{code}\r\n",
])
def test_agrees_with_jira2markdown_on_representative_text(wiki, convert):
    assert normalise(markdown(wiki)) == normalise(convert(wiki))


@pytest.mark.parametrize(("wiki", "theirs", "ours"), [
    ("!a.png|thumbnail!", "![a.png](a.png)", "a.png"),
    ("[^log.txt]", "[log.txt](log.txt)", "log.txt"),
    ("{color:red}x{color}", '<font color="red">x</font>', "x"),
    ("[~john.doe]", "[~john.doe]", "@john.doe"),
    ("\\*", "\\\\*", "\\*"),
])
def test_deliberate_differences_from_jira2markdown(wiki, theirs, ours, convert):
    assert convert(wiki) == theirs
    assert markdown(wiki) == ours


ADVERSARIAL = ["*{[|", "*a [b|c {{d ~e -f +g ^h ??i !j ", "[a|", "!abc|", "* ", "a* *b ",
               "{code", "{quote}a{panel}", "-", "\\", "http://x*y "]


def repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def test_a_megabyte_of_unbalanced_markup_converts_in_linear_steps():
    text = repeat("*a{[|", 1_000_000)
    result = jira_to_markdown(text, budget_seconds=600)
    assert result.warning is None
    assert result.steps <= 4 * len(text)
    assert result.markdown == text.replace("*", "\\*")


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_steps_grow_linearly_with_the_text(unit):
    small = jira_to_markdown(repeat(unit, 20_000), budget_seconds=600)
    large = jira_to_markdown(repeat(unit, 40_000), budget_seconds=600)
    assert small.warning is None and large.warning is None
    assert large.steps <= 2.1 * small.steps
    assert large.steps <= 16 * 40_000


def test_an_item_over_its_budget_is_kept_as_written_with_a_warning():
    text = repeat("*bold* [link|http://x.com] {{code}} ", 200_000) + "\r\n"
    result = jira_to_markdown(text, budget_seconds=0)
    assert result.markdown == text.strip()
    assert result.warning is not None and "budget" in result.warning
    assert result.steps < len(text) / 4  # it stopped early


def test_result_is_a_frozen_value():
    result = jira_to_markdown("*x*")
    assert result == MarkupResult("**x**", None, result.steps)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.markdown = "y"  # type: ignore[misc]
    assert jira_to_markdown("").markdown == ""


def adf(*content, kind="doc", **attrs):
    node = {"type": kind, "content": list(content)}
    if attrs:
        node["attrs"] = attrs
    return node


def text(value):
    return {"type": "text", "text": value}


def test_adf_to_text_reads_the_usual_nodes():
    document = adf(
        adf(text("Title"), kind="heading", level=3),
        adf(text("Hello "), {"type": "mention", "attrs": {"text": "@Ann"}},
            {"type": "hardBreak"}, text("bye"), kind="paragraph"),
        adf(adf(adf(text("one"), kind="paragraph"), kind="listItem"), kind="bulletList"),
        adf(text("x = 1"), kind="codeBlock", language="python"))
    assert adf_to_text(document) == (
        "### Title\n\nHello @Ann\nbye\n\n- one\n\n```python\nx = 1\n```\n\n")


@pytest.mark.parametrize("level", ["high", None, [], {}, "9" * 5000, float("inf"), -4])
def test_adf_bad_heading_levels_fall_back(level):
    rendered = adf_to_text(adf(adf(text("T"), kind="heading", level=level)))
    assert rendered.strip().lstrip("#") == " T"


def test_adf_bad_shapes_never_raise():
    assert adf_to_text(None) == ""
    assert adf_to_text("just a string") == ""
    assert adf_to_text(text("top-level text")) == "top-level text"
    weird = {"type": "paragraph", "attrs": "not a dict",
             "content": ["str", 5, None, [text("a")], {"type": "text", "text": 7},
                         {"type": "mention", "attrs": None}, {"no": "type"}, text("b")]}
    assert adf_to_text(weird) == "ab\n\n"
    assert adf_to_text({"type": "doc", "content": "not a list"}) == ""


def test_adf_deep_and_cyclic_trees_do_not_recurse():
    deep = text("leaf")
    for _ in range(sys.getrecursionlimit() * 20):
        deep = {"type": "blockquote", "content": [deep]}
    assert adf_to_text(deep).startswith("leaf")
    cyclic = {"type": "paragraph", "content": [text("x")]}
    cyclic["content"].append(cyclic)
    assert adf_to_text(cyclic) == "x\n\n"
