"""Every command the README and docs/ show in a shell block, run as written from a published
project folder (``published_project``: the shipped jarvis.yaml, ``.venv``, the sample data),
each exiting 0 and, where the docs say what it prints and that is cheap to check, printing it.

A command that is one `.venv/bin/jarvis` with its arguments runs in this process, one after
the other: bash reads each command line (quotes, comments, expansions) and hands back its
arguments, and the `jarvis` entry point (``jarvis_cli.main:cli``, checked against
pyproject.toml) runs with them in the project folder — about half a second saved per command
against a fresh process each. Anything else runs in bash as written; a server block's
commands are started, checked for an HTTP answer and stopped. Blocks marked ``ci`` (.ci/run
runs them) or ``skip`` (with their reason) are checked in tests/unit/test_docs.py and listed
here; no other block is left out."""

import os
import re
import signal
import socket
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from jarvis_cli.main import cli
from tests.docs_pages import PAGES, PROJECT_ROOT, has_shell_operators, shell_blocks, without_comment

pytestmark = pytest.mark.slow

JARVIS = ".venv/bin/jarvis"
COMMAND_SECONDS = 300
SERVER_SECONDS = 60
# What the docs say these commands print (regular expressions, searched line by line).
PRINTS = {
    ".venv/bin/jarvis refresh": r"nothing changed since serving version .*: no source ran",
    ".venv/bin/jarvis status": r"messages +threads +pages",
    ".venv/bin/jarvis vaults": r"lumen-mail \(mail, .*: 10 messages, 3 threads",
    '.venv/bin/jarvis keyword "boot_id instead of observed_at, no Redis dedupe window" '
    "--content --limit 3": r"^ 1\. \S+ +lumen-mail/threads/CAK7wq2dedupe01\.1009@",
    '.venv/bin/jarvis graph "thread:lumen-mail/CAK7wq2dedupe01.1009@mail.lumen.example" '
    "--depth 2": r"Ingest: idempotency and the dedupe key",
    ".venv/bin/jarvis graph LUM-4": r"^LUM-4: Idempotent ingest",
    ".venv/bin/jarvis graph lumen#7": r"^lumen#7: Station clock drift",
    '.venv/bin/jarvis hybrid "how do we make retried writes safe" --limit 5':
        r"\(keyword #\d+, semantic #\d+\)",
    '.venv/bin/jarvis read "<CAK7wq2dedupe03.1010@mail.lumen.example>"':
        r"threads/CAK7wq2dedupe01\.1009@mail\.lumen\.example, email",
    '.venv/bin/jarvis read "Ingest: idempotency and the dedupe key"':
        r"lumen-wiki/pages/65541, page",
    ".venv/bin/jarvis read LUM-4": r"^status: In Review$",
    ".venv/bin/jarvis read 5d24297": r"^- src/lumen/ingest/dedupe\.py, additions: 10, deletions: 0",
    ".venv/bin/jarvis read README.md --vault lumen": r"^language: Markdown$",
    ".venv/bin/jarvis context lumen": r"commits per author",
    ".venv/bin/jarvis token create --profile all --client laptop": r"jv_[0-9a-f]{8}_",
    ".venv/bin/jarvis serve --http 8765": r"^401 .*invalid_token",
    "DAGSTER_HOME=$PWD/.jarvis/dagster .venv/bin/dagster job backfill -w workspace.yaml "
    "-j refresh_sources --all true --noprompt": r"Launched backfill job",
}


def documented_commands() -> list[tuple[str, str | None, str, str]]:
    """(where, marker, command, server URL) of every command shown, in the order a reader
    meets them (README first), each command line once."""
    shown, seen = [], set()
    for page in PAGES:
        for block in shell_blocks(page):
            for command in block.commands:
                if without_comment(command) not in seen:
                    seen.add(without_comment(command))
                    shown.append((block.where, block.marker, command, block.argument))
    return shown


def is_one_jarvis_call(command: str) -> bool:
    return command.startswith(JARVIS + " ") and not has_shell_operators(command)


def arguments_as_bash_reads_them(commands: list[str], cwd) -> list[list[str]]:
    """The arguments bash passes to `.venv/bin/jarvis` in each of ``commands``, from one bash
    process that runs each command line with a function in the program's place."""
    script = "\n".join(["__args() { printf '%s\\0' \"$#\" \"$@\"; }",
                        *(f"__args{command[len(JARVIS):]}" for command in commands)])
    fields = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                            check=True).stdout.split("\0")
    parsed = []
    while len(parsed) < len(commands):
        count, fields = int(fields[0]), fields[1:]
        parsed.append(fields[:count])
        fields = fields[count:]
    return parsed


def run_in_bash(command: str, cwd) -> tuple[int, str]:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=COMMAND_SECONDS)
    return done.returncode, done.stdout + done.stderr


def serve(command: str, url: str, cwd, log_path) -> tuple[int, str]:
    """Start the server ``command`` in bash, wait until ``url`` answers, stop it: (0, the
    status and body of the first answer), or (1, why not)."""
    address = urlsplit(url)
    with socket.socket() as probe:
        if probe.connect_ex((address.hostname, address.port)) == 0:
            return 1, f"port {address.port} is already in use: cannot start {command!r}"
    with open(log_path, "w") as log:
        server = subprocess.Popen(["bash", "-c", command], cwd=cwd, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_SECONDS
        while time.monotonic() < deadline:
            if server.poll() is not None:
                return 1, f"exited {server.returncode}: {log_path.read_text()}"
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=b"{}"),
                                            timeout=5) as answer:
                    return 0, f"{answer.status} {answer.read().decode()}"
            except urllib.error.HTTPError as answer:
                return 0, f"{answer.code} {answer.read().decode()}"
            except OSError:
                time.sleep(0.1)
        return 1, f"no answer at {url} within {SERVER_SECONDS} s: {log_path.read_text()}"
    finally:
        stop(server)


def stop(server: subprocess.Popen) -> None:
    """End the server's process group (the server, and bash if it did not exec it)."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sent)
        except ProcessLookupError:  # the whole group has exited
            return
        try:
            server.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


def test_the_jarvis_command_is_the_cli_this_test_invokes(published_project):
    scripts = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["jarvis"] == f"{cli.callback.__module__}:{cli.name}" == "jarvis_cli.main:cli"
    assert (published_project.config_path.parent / JARVIS).is_file()


def test_every_documented_command_runs_as_written(published_project, monkeypatch, tmp_path):
    project = published_project.config_path.parent
    monkeypatch.chdir(project)
    shown = documented_commands()
    assert set(PRINTS) <= {without_comment(command) for _, _, command, _ in shown}, (
        "an expected output for a command the docs no longer show")
    in_process = [command for _, marker, command, _ in shown
                  if marker is None and is_one_jarvis_call(command)]
    arguments = dict(zip(in_process, arguments_as_bash_reads_them(in_process, project),
                         strict=True))
    failures, report = [], []
    for where, marker, command, url in shown:
        started = time.perf_counter()
        if marker in ("ci", "skip"):
            report.append(f"  {marker:8} {where} {command}")
            continue
        if marker == "server":
            status, output = serve(command, url, project, tmp_path / "server.log")
        elif command in arguments:
            result = CliRunner().invoke(cli, arguments[command])
            status, output = result.exit_code, result.output + (
                f"\n{result.exception!r}" if result.exception and result.exit_code != 0 else "")
        else:
            status, output = run_in_bash(command, project)
        how = marker or ("jarvis" if command in arguments else "bash")
        report.append(f"  {how:8} {time.perf_counter() - started:5.2f} s  {where} {command}")
        expected = PRINTS.get(without_comment(command))
        if status != 0:
            failures.append(f"{where}: {command}\n  exit {status}: {output[-2000:]}")
        elif expected and not re.search(expected, output, re.MULTILINE):
            failures.append(f"{where}: {command}\n  does not print /{expected}/:\n{output[-2000:]}")
    print("\n".join(["documented commands:", *report]))
    assert not failures, "\n\n".join(failures)
