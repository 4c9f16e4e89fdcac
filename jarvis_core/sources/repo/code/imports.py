"""Where a file's imports lead inside its repository, by each language's own rules, from the
paths of the repository's source files alone:

- Python: dotted modules to ``pkg/mod.py`` or ``pkg/mod/__init__.py`` under the repository
  root, under every folder that holds top-level packages (``src/``), or beside the importing
  file (a script's folder is on its path); relative imports (``from ..pkg import x``) from
  the importing file's package; ``from pkg import mod`` is the module ``pkg/mod.py`` when
  there is one.
- JavaScript and TypeScript: relative specifiers (``./x``, ``../lib/y``) with the extensions
  and ``index`` files the bundlers try (``./x.js`` also finds ``x.ts``); bare specifiers are
  packages, from outside.
- Go: an import path is a package: the folder whose path is the longest suffix of it; every
  file of that folder but its tests.
- Java and Kotlin: a class by its package path and file name (``com.x.UserService`` in
  ``…/com/x/UserService.java``), a wildcard or a Kotlin top-level name by its package's
  folders.

Anything else is from outside the repository (the standard library, a third-party package):
it resolves to no file.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

_PYTHON = (".py", ".pyi")
_SCRIPT = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_JVM = (".java", ".kt", ".kts")
_COMPILED_JS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


@dataclass(frozen=True)
class Import:
    """What one import brings into a file: the files it resolves to inside the repository
    (none: it comes from outside), the local name it binds (None: it names nothing, as a
    side-effect import), the name it takes from those files (None: the module itself), or
    every top-level name of them (``star``)."""

    files: tuple[str, ...]
    local: str | None
    imported: str | None
    star: bool = False


def _folder(path: str) -> str:
    return posixpath.dirname(path)


def _joined(folder: str, *parts: str) -> str:
    return posixpath.join(folder, *parts) if folder else posixpath.join(*parts)


def _unquoted(name: str) -> str:
    return name.strip().strip("\"'`<>")


def _declared(name: str, *keywords: str) -> str:
    """A dotted name without the keywords written before it or the ``;`` after it."""
    name = name.strip().rstrip(";").strip()
    for keyword in keywords:
        if name.startswith(keyword + " "):
            name = name[len(keyword):].strip()
    return name


class ImportResolver:
    """Resolves the imports of one repository's files; built once from every path."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = set(paths)
        self.by_folder: dict[str, list[str]] = defaultdict(list)
        for path in sorted(self.paths):
            self.by_folder[_folder(path)].append(path)
        self.python_modules = self._python_modules()
        self.jvm_packages: dict[str, list[str]] = defaultdict(list)
        for folder, files in self.by_folder.items():
            if folder and any(f.endswith(_JVM) for f in files):
                parts = folder.split("/")
                for start in range(len(parts)):
                    self.jvm_packages["/".join(parts[start:])].append(folder)

    def _python_modules(self) -> dict[str, list[str]]:
        """Dotted module -> files, under every root: the repository's and each folder that
        holds top-level packages (a package is a folder with ``__init__.py``)."""
        packages = {_folder(p) for p in self.paths if posixpath.basename(p) == "__init__.py"}
        roots = {""} | {_folder(p) for p in packages if _folder(p) not in packages}
        modules: dict[str, list[str]] = defaultdict(list)
        for path in sorted(p for p in self.paths if p.endswith(_PYTHON)):
            parts = posixpath.splitext(path)[0].split("/")
            if parts[-1] == "__init__":
                parts.pop()
            for start in range(len(parts)):
                if "/".join(parts[:start]) in roots and parts[start:]:
                    modules[".".join(parts[start:])].append(path)
        return modules

    def resolve(self, language: str, importer: str, name: str,
                qualifier: str | None) -> Import:
        """Where the import ``name`` (as written; ``qualifier``: the name or alias it binds)
        of ``importer`` leads."""
        if language == "python":
            return self._python(importer, name.strip(), qualifier)
        if language in ("javascript", "typescript"):
            files = self._script(importer, _unquoted(name))
            return Import(files, qualifier, qualifier)
        if language == "go":
            return self._go(_unquoted(name), qualifier)
        if language in ("java", "kotlin"):
            return self._jvm(_declared(name, "import", "static"), qualifier)
        return Import((), qualifier, qualifier)

    # -- Python ------------------------------------------------------------------------

    def _python_module(self, importer: str, module: str) -> tuple[str, ...]:
        """The file of a dotted module (relative when it starts with dots)."""
        if module.startswith("."):
            rest = module.lstrip(".")
            base = _folder(importer)
            for _ in range(len(module) - len(rest) - 1):
                if not base:
                    return ()
                base = _folder(base)
            stem = _joined(base, *rest.split(".")) if rest else base
            return self._python_file(stem)
        found = self.python_modules.get(module)
        if found:
            return (max(found, key=lambda p: (len(posixpath.commonpath([p, importer])),
                                              -len(p))),)
        return self._python_file(_joined(_folder(importer), *module.split(".")))

    def _python_file(self, stem: str) -> tuple[str, ...]:
        for candidate in (f"{stem}.py", f"{stem}.pyi", _joined(stem, "__init__.py")):
            if candidate in self.paths:
                return (candidate,)
        return ()

    def _python(self, importer: str, module: str, qualifier: str | None) -> Import:
        if qualifier is None:  # import a.b.c: the name a.b.c is bound
            return Import(self._python_module(importer, module), module, None)
        if qualifier == "*":
            return Import(self._python_module(importer, module), None, None, star=True)
        joined = f"{module}{qualifier}" if module.endswith(".") else f"{module}.{qualifier}"
        submodule = self._python_module(importer, joined)
        if submodule:  # from pkg import mod
            return Import(submodule, qualifier, None)
        return Import(self._python_module(importer, module), qualifier, qualifier)

    # -- JavaScript, TypeScript ------------------------------------------------------------

    def _script(self, importer: str, spec: str) -> tuple[str, ...]:
        if not spec.startswith("."):
            return ()  # a package (or a path alias the bundler's configuration defines)
        base = posixpath.normpath(_joined(_folder(importer), spec))
        if base.startswith("..") or base == ".":
            return ()
        stem, extension = posixpath.splitext(base)
        candidates = [base, *(stem + other for other in _COMPILED_JS.get(extension, ())),
                      *(base + ext for ext in _SCRIPT),
                      *(_joined(base, "index" + ext) for ext in _SCRIPT)]
        return next(((c,) for c in candidates if c in self.paths), ())

    # -- Go ------------------------------------------------------------------------------

    def _go(self, spec: str, qualifier: str | None) -> Import:
        segments = spec.split("/")
        files: tuple[str, ...] = ()
        for start in range(len(segments)):
            package = [p for p in self.by_folder.get("/".join(segments[start:]), ())
                       if p.endswith(".go") and not p.endswith("_test.go")]
            if package:
                files = tuple(package)
                break
        if qualifier == ".":
            return Import(files, None, None, star=True)
        local = None if qualifier == "_" else qualifier or segments[-1]
        return Import(files, local, None)

    # -- Java, Kotlin ----------------------------------------------------------------------

    def _jvm_package(self, segments: list[str]) -> list[str]:
        return [p for folder in self.jvm_packages.get("/".join(segments), ())
                for p in self.by_folder[folder] if p.endswith(_JVM)]

    def _jvm(self, name: str, qualifier: str | None) -> Import:
        segments = name.split(".")
        if segments[-1] == "*":
            return Import(tuple(self._jvm_package(segments[:-1])), None, None, star=True)
        local = qualifier or segments[-1]
        for split in (len(segments) - 1, len(segments) - 2):  # a class, a static member
            if split < 1:
                break
            package = self._jvm_package(segments[:split])
            named = tuple(p for p in package
                          if posixpath.splitext(posixpath.basename(p))[0] == segments[split])
            if named:
                return Import(named, local, segments[-1])
            if package and split == len(segments) - 1:  # a Kotlin top-level name
                return Import(tuple(package), local, segments[-1])
        return Import((), local, segments[-1])
