"""``jarvis bench code --scale FILES``: the symbol layer on a generated repository of FILES
source files, through the real ingest functions (``raw_repository`` then ``code_symbols``,
each with an ``IngestRun`` on a DuckDB file, no embeddings): the first ingest, a commit
that changes one file, and a run with nothing changed.

The generated files are Python, Go and JavaScript in turn, 100 to 400 lines each, in
packages of 100 files: classes (structs with methods in Go) and functions, some documented,
whose bodies branch, loop and call functions of their own file and of other files (imported
as each language imports).
"""

from __future__ import annotations

import random
import resource
import shutil
import subprocess
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import duckdb

from jarvis_core.settings import IngestSettings
from jarvis_core.sources import registry
from jarvis_core.sources.kind import IngestRun
from jarvis_core.sources.plan import utc_now
from jarvis_core.sources.repo.code.ingest import ingest as ingest_code
from jarvis_core.sources.repo.ingest import ingest as ingest_repository
from jarvis_core.sources.repo.settings import RepoConfig
from jarvis_core.stores import tables

LANGUAGES = ("python", "go", "javascript")
PACKAGE_FILES = 100
HELPERS = 3  # functions every file defines, which other files call
MIN_LINES, MAX_LINES = 100, 400
_VERBS = ("load", "save", "build", "check", "merge", "parse", "render", "compute", "resolve",
          "update", "fetch", "filter", "index", "encode", "apply")
_NOUNS = ("order", "invoice", "user", "session", "record", "batch", "token", "report",
          "channel", "ledger", "policy", "schedule", "payload", "cache", "account")
GIT_IDENTITY = ("-c", "user.name=Jarvis Bench", "-c", "user.email=bench@jarvis.invalid")


def _place(index: int) -> tuple[str, str, str]:
    """File ``index``'s language, package and path."""
    language = LANGUAGES[index % len(LANGUAGES)]
    package = f"pkg{index // PACKAGE_FILES}"
    suffix = {"python": "py", "go": "go", "javascript": "js"}[language]
    return language, package, f"{package}/mod{index}.{suffix}"


def _helper(index: int, k: int, language: str) -> str:
    return f"Helper{index}_{k}" if language == "go" else f"helper_{index}_{k}"


class _FileWriter:
    """One generated file of ``language``: units (classes, functions) until it is long
    enough, calling its own helpers and those of ``others`` (file indexes)."""

    def __init__(self, rng: random.Random, index: int, files: int) -> None:
        self.rng, self.index = rng, index
        self.language, self.package, self.path = _place(index)
        same = len(LANGUAGES)  # files of this language are every third
        self.others = [other if other < files else index for other in (
            rng.randrange(files) // same * same + index % same for _ in range(3))]
        self.names = 0

    def name(self, capital: bool = False) -> str:
        self.names += 1
        verb, noun = self.rng.choice(_VERBS), self.rng.choice(_NOUNS)
        if capital or self.language != "python":
            return f"{verb.capitalize() if capital else verb}{noun.capitalize()}{self.names}"
        return f"{verb}_{noun}_{self.names}"

    def callee(self) -> str:
        other = self.rng.choice([self.index, *self.others])
        name = _helper(other, self.rng.randrange(HELPERS), self.language)
        if other == self.index or self.language == "javascript":
            return name
        if self.language == "go":
            package = _place(other)[1]
            return name if package == self.package else f"{package}.{name}"
        return f"mod{other}.{name}"

    def statements(self, indent: str, depth: int = 0) -> list[str]:
        """A few statements: assignments of calls, a branch or a loop around more."""
        body = []
        for _ in range(self.rng.randint(1, 3) if depth else self.rng.randint(2, 4)):
            choice = self.rng.random()
            call = f"{self.callee()}(value, {self.rng.randint(1, 99)})"
            if choice < 0.5 or depth:
                body.append(self.assign(indent, call))
            elif self.language == "python":
                head = "if value > limit:" if choice < 0.75 else "for item in range(limit):"
                body += [indent + head, *self.statements(indent + "    ", depth + 1)]
            else:
                head = ("if (value > limit) {" if choice < 0.75 else
                        "for (let item = 0; item < limit; item++) {")
                if self.language == "go":
                    head = head.replace("(", "", 1).replace(") {", " {").replace("let ", "")
                    head = head.replace("item = 0", "item := 0")
                body += [indent + head, *self.statements(indent + "\t" if self.language == "go"
                                                         else indent + "  ", depth + 1),
                         indent + "}"]
        return body

    def assign(self, indent: str, call: str) -> str:
        if self.language == "python":
            return f"{indent}value = {call}"
        return f"{indent}value = {call}" + (";" if self.language == "javascript" else "")

    def function(self, name: str, receiver: str | None = None) -> list[str]:
        """A function (a method with ``receiver``, its class's name), maybe documented."""
        doc = self.rng.random() < 0.6
        words = f"{name.replace('_', ' ')} for the given value, within the limit"
        if self.language == "python":
            indent = "    " * (2 if receiver else 1)
            params = "self, value, limit=10" if receiver else "value, limit=10"
            return [f"{indent[4:]}def {name}({params}):",
                    *([f'{indent}"""{words.capitalize()}."""'] if doc else []),
                    *self.statements(indent), f"{indent}return value", ""]
        if self.language == "go":
            head = f"func (s *{receiver}) {name}" if receiver else f"func {name}"
            return [*([f"// {name} {words}."] if doc else []),
                    f"{head}(value int, limit int) int {{", *self.statements("\t"),
                    "\treturn value", "}", ""]
        indent = "    " if receiver else "  "
        return [*([f"{indent[2:]}/** {words.capitalize()}. */"] if doc else []),
                f"{indent[2:]}{'' if receiver else 'function '}{name}(value, limit = 10) {{",
                *self.statements(indent), f"{indent}return value;", f"{indent[2:]}}}", ""]

    def unit(self) -> list[str]:
        if self.rng.random() < 0.6:
            return self.function(self.name())
        cls = self.name(capital=True)
        methods = [self.function(self.name(capital=self.language == "go"), cls)
                   for _ in range(self.rng.randint(2, 5))]
        if self.language == "python":
            return [f"class {cls}:", f'    """A {cls} kept by its package."""', "",
                    *[line for method in methods for line in method], ""]
        if self.language == "go":
            return [f"type {cls} struct {{", "\tlimit int", "}", "",
                    *[line for method in methods for line in method]]
        return [f"class {cls} {{", *[line for method in methods for line in method], "}", ""]

    def text(self, target: int) -> str:
        """The file, about ``target`` lines long (at least MIN_LINES)."""
        lines = self.header()
        for k in range(HELPERS):
            lines += self.function(_helper(self.index, k, self.language))
        while True:
            unit = self.unit()
            if len(lines) + len(unit) > target and len(lines) >= MIN_LINES:
                break
            lines += unit
        if self.language == "javascript":
            lines.append("module.exports = { " + ", ".join(
                _helper(self.index, k, self.language) for k in range(HELPERS)) + " };")
        return "\n".join(lines) + "\n"

    def header(self) -> list[str]:
        if self.language == "python":
            return [f'"""Module {self.index} of {self.package}."""', "",
                    *sorted({f"from {_place(o)[1]} import mod{o}" for o in self.others}), "",
                    ""]
        if self.language == "go":
            imports = sorted({_place(o)[1] for o in self.others} - {self.package})
            return [f"package {self.package}", "", *(f'import "gen/{p}"' for p in imports), ""]
        return [*(f"const {{ {', '.join(_helper(o, k, 'javascript') for k in range(HELPERS))} }}"
                  f" = require('../{_place(o)[1]}/mod{o}');"
                  for o in sorted(set(self.others) - {self.index})), ""]


def write_code_repository(root: Path, files: int, seed: int = 0) -> Path:
    """A git repository at ``root`` with ``files`` generated source files in one commit."""
    rng = random.Random(seed)
    for index in range(files):
        writer = _FileWriter(rng, index, files)
        path = root / writer.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(writer.text(rng.randint(MIN_LINES, MAX_LINES)))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, *GIT_IDENTITY, "commit", "-qm", f"{files} generated source files")
    return root


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (git)."""
    return sum(usage.ru_utime + usage.ru_stime for usage in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def _ingest(conn: duckdb.DuckDBPyConnection, root: Path, settings: RepoConfig) -> dict:
    """Both layers once, as the pipeline runs them: wall and CPU seconds, and what the code
    layer parsed."""
    warnings: list[str] = []
    run = IngestRun("generated", settings, lambda: nullcontext(conn), IngestSettings(),
                    root.parent, utc_now(), warnings.append)
    started, cpu = time.perf_counter(), _cpu()
    repository = ingest_repository(run)
    code = ingest_code(run)
    return {"seconds": round(time.perf_counter() - started, 2),
            "cpu_seconds": round(_cpu() - cpu, 2),
            "raw_repository_seconds": repository.seconds, "code_symbols_seconds": code.seconds,
            "files_parsed": code.counts["new"] + code.counts["changed"],
            "symbols": code.figures["code_symbols"], "code_files": code.figures["code_files"],
            "partial": code.figures["partial"], "skipped": code.figures["skipped"],
            "warnings": len(warnings)}


def run_scale_benchmark(files: int, seed: int = 0) -> dict:
    """The symbol layer's first ingest, one-file change and no-op on ``files`` generated
    files."""
    scratch = Path(tempfile.mkdtemp(prefix="jarvis-bench-code-scale-"))
    try:
        started = time.perf_counter()
        root = write_code_repository(scratch / "repo", files, seed)
        generated = time.perf_counter() - started
        settings = RepoConfig(path=root)
        with duckdb.connect(str(scratch / "jarvis.duckdb")) as conn:
            tables.ensure_schema(conn, registry.declared_tables())
            first = _ingest(conn, root, settings)
            changed = root / _place(files // 2)[2]
            changed.write_text(changed.read_text().replace("value = ", "value = 1 + ", 1))
            _git(root, *GIT_IDENTITY, "commit", "-qam", "change one file")
            one = _ingest(conn, root, settings)
            noop = _ingest(conn, root, settings)
        lines = sum(len(path.read_bytes().splitlines()) for path in root.rglob("mod*.*"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "files": files, "lines": lines, "generate_seconds": round(generated, 1),
        "symbols": first["symbols"], "first_ingest_seconds": first["seconds"],
        "first_ingest_cpu_seconds": first["cpu_seconds"],
        "files_per_s": round(files / first["seconds"], 1),
        "symbols_per_s": round(first["symbols"] / first["seconds"], 1),
        "one_file_change_seconds": one["seconds"], "files_reparsed": one["files_parsed"],
        "noop_seconds": noop["seconds"], "noop_files_parsed": noop["files_parsed"],
        "runs": {"first": first, "one_file_change": one, "noop": noop},
    }
