"""Code chunks: one per symbol that fits, cut at statements when it does not, every chunk
headed by the qualified name, the file and the signature."""

import pytest

from jarvis_core.text.code_chunking import chunk_code
from jarvis_core.text.tokens import token_counter

SHORT = '''def create_user(self, name: str) -> User:
    """Create a user."""
    user = User(name)
    self.store.add(user)
    return user
'''


def _long_function(statements: int) -> str:
    body = "".join(
        f"    if request.kind == 'kind_{i}':\n"
        f"        handle_kind_{i}(request, registry.lookup('handler_{i}'), retries={i})\n"
        f"        metrics.increment('dispatch.kind_{i}')\n"
        for i in range(statements))
    return f"def dispatch(request, registry, metrics):\n{body}    return None\n"


@pytest.fixture(scope="module")
def counter():
    return token_counter("all-MiniLM-L6-v2", max_tokens=128)


def test_a_short_symbol_is_one_chunk_headed_by_name_file_and_signature(counter):
    chunks = chunk_code(SHORT, title="UserService.create_user",
                        path="src/app/service.py::UserService.create_user",
                        doc_key="code:repo/src/app/service.py::UserService.create_user",
                        counter=counter)
    assert [chunk.text for chunk in chunks] == [SHORT.rstrip("\n")]
    assert chunks[0].heading_path == ("src/app/service.py",
                                      "def create_user(self, name: str) -> User:")
    assert chunks[0].context == ("UserService.create_user > src/app/service.py > "
                                 "def create_user(self, name: str) -> User:")


def test_a_long_symbol_is_cut_at_its_statements_each_chunk_fitting(counter):
    body = _long_function(30)
    chunks = chunk_code(body, title="dispatch", path="app/dispatch.py::dispatch",
                        doc_key="code:repo/app/dispatch.py::dispatch", counter=counter)
    assert len(chunks) > 3
    assert all(chunk.token_count <= counter.max_tokens for chunk in chunks)
    assert all(chunk.heading_path[1] == "def dispatch(request, registry, metrics):"
               for chunk in chunks)
    # every chunk after the first starts at a statement of the body: an `if` at its indent
    assert all(chunk.text.lstrip().startswith("if request.kind") for chunk in chunks[1:])
    # no overlap, nothing lost: the chunks are consecutive slices of the body
    for before, after in zip(chunks, chunks[1:]):
        assert before.char_end <= after.char_start
        assert body[before.char_end:after.char_start].strip() == ""
    assert chunks[0].char_start == 0 and body[chunks[-1].char_end:].strip() == ""


def test_a_statement_too_long_alone_is_cut_at_its_lines(counter):
    lines = "".join(f"        step_{i}(context, value_{i}, option_{i})\n" for i in range(60))
    body = f"def run(context):\n    with lock:\n{lines}    return context\n"
    chunks = chunk_code(body, title="run", path="run.py::run", doc_key="code:r/run.py::run",
                        counter=counter)
    assert len(chunks) > 2
    assert all(chunk.token_count <= counter.max_tokens for chunk in chunks)
    assert all(chunk.text.split("\n")[0].lstrip().startswith(("def ", "with ", "step_"))
               for chunk in chunks)


def test_a_doc_comment_heads_the_text_and_the_declaration_stays_the_heading(counter):
    body = "// Foo does the thing.\n// Second line.\nfunc Foo() int {\n\treturn 1\n}"
    [chunk] = chunk_code(body, title="Foo", path="a.go::Foo", doc_key="code:r/a.go::Foo",
                         counter=counter)
    assert chunk.heading_path == ("a.go", "func Foo() int {")
    assert chunk.text.startswith("// Foo does the thing.")
