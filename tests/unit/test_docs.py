"""The README and docs/ as a reader sees them: every relative link leads to a file (and a
heading) that exists, every shell block is run or says why not, the set-up commands are
the ones CI runs, and the README stays a five-minute read. Running the commands is
tests/e2e/test_documented_commands.py."""

import re
from urllib.parse import unquote, urlsplit

from tests.docs_pages import (
    OTHER_SHELLS,
    PAGES,
    PROJECT_ROOT,
    fences,
    headings,
    links,
    markers,
    shell_blocks,
)

README_MAX_LINES = 250
SERVERS = r"\.venv/bin/(jarvis (serve|ui|daemon)|dagster(-daemon)? (dev|run)|dagster-webserver)\b"
TOPICS = ("sources", "configuration", "queries", "analytics", "operations", "architecture",
          "benchmarks", "deployment")


def test_the_readme_is_short_and_links_every_topic_page():
    readme = PROJECT_ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= README_MAX_LINES
    assert {f"docs/{topic}.md" for topic in TOPICS} <= set(links(readme))
    assert {page.stem for page in PAGES[1:]} == set(TOPICS), "a docs page the README omits"


def test_relative_links_lead_to_files_and_headings_that_exist():
    broken = []
    for page in PAGES:
        for href in links(page):
            target = urlsplit(href)
            if target.scheme or target.netloc:
                continue
            path = (page.parent / unquote(target.path)).resolve() if target.path else page
            if not path.exists():
                broken.append(f"{page.name}: {href} (no {path})")
            elif target.fragment and (path.suffix != ".md"
                                      or target.fragment not in headings(path)):
                broken.append(f"{page.name}: {href} (no heading #{target.fragment})")
    assert not broken, "\n".join(broken)


def test_every_shell_block_is_run_or_marked_with_a_reason():
    for page in PAGES:
        blocks = shell_blocks(page)  # a malformed marker raises here
        assert len(markers(page)) == sum(block.marker is not None for block in blocks), (
            f"{page.name}: a docs-test marker that stands before no ```bash block")
        for block in blocks:
            assert block.commands, f"{block.where}: an empty shell block"
            if block.marker is None:
                assert not any(re.match(SERVERS, command) for command in block.commands), (
                    f"{block.where}: a server runs until stopped: mark its block 'server URL' "
                    "or 'skip: reason'")
            if block.marker == "skip":
                assert len(block.argument) > 20, f"{block.where}: skip needs its reason"
            if block.marker == "server":
                assert block.argument.startswith("http://"), f"{block.where}: server URL"
        for fence in fences(page):
            assert fence.language not in OTHER_SHELLS, (
                f"{page.name}:{fence.line}: shell blocks are ```bash, so that they are run")
            if fence.language != "bash":
                assert not any(line.startswith((".venv/", "python", "$ "))
                               for line in fence.text.splitlines()), (
                    f"{page.name}:{fence.line}: commands in a ```{fence.language} block")


def test_the_set_up_commands_are_what_ci_runs_verbatim():
    ci_lines = (PROJECT_ROOT / ".ci" / "run").read_text().splitlines()
    set_up = [block for page in PAGES for block in shell_blocks(page) if block.marker == "ci"]
    assert [block.page.name for block in set_up] == ["README.md", "README.md"]
    for block in set_up:
        for command in block.commands:
            assert any(line == command or line.startswith(command + " ") for line in ci_lines), (
                f"{block.where}: .ci/run does not run {command!r} as written")
