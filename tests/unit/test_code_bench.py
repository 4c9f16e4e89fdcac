"""`jarvis bench code`'s search and scale parts (jarvis_bench/code_search.py, code_scale.py):
the queries and the docstring-free corpus CodeSearchNet-style, MRR and recall, and the
generated repository the symbol layer is measured on."""

import subprocess
import time
from textwrap import dedent

import pytest

from jarvis_bench.code_scale import (
    MAX_LINES,
    MIN_LINES,
    run_scale_benchmark,
    write_code_repository,
)
from jarvis_bench.code_search import (
    code_search_dataset,
    first_sentence,
    mrr_and_recall,
    run_code_search,
    without_docstring,
)
from jarvis_core.sources.repo.code.languages import grammar_for
from jarvis_core.sources.repo.code.model import CALL, PARSED
from jarvis_core.sources.repo.code.parse import parse_file
from tests.source_helpers import Repo

BILLING = dedent('''\
    """Billing."""


    class Ledger:
        """Keeps entries."""

        def post_invoice_entry(self, invoice, ledger_book):
            """Post an invoice entry into the ledger book.

            More words that are not the query.
            """
            entry = ledger_book.new_entry(invoice)
            ledger_book.append(entry)
            return entry

        def __repr__(self):
            """The ledger, as the console shows it."""
            return "Ledger()"


    def compute_shipping_cost(parcel_weight, distance):
        """Compute the shipping cost of a parcel over a distance."""
        rate = parcel_weight * 0.5
        return rate * distance


    def test_shipping_cost_is_positive():
        """The shipping cost is never negative."""
        cost = compute_shipping_cost(1, 2)
        assert cost >= 0


    def render_weather_forecast(city_forecast):
        """Render the weather forecast of a city as text lines."""
        lines = [city_forecast.city]
        lines += [str(day) for day in city_forecast.days]
        return "\\n".join(lines)


    def short(value):
        """Too short a function to ask a query."""
        return value
    ''')

GO = dedent('''\
    package request

    // ParseHeader splits the header fields of a request.
    func ParseHeader(request string) []string {
    \tfields := strings.Split(request, ":")
    \treturn fields
    }
    ''')

# A class's text keeps its methods' leading comments: the query is in another document.
MAILER = dedent('''\
    class Mailer {
      /** Deliver the queued mail messages now. */
      deliverQueued(queue) {
        const sent = queue.map(send);
        return sent;
      }
    }
    ''')


def symbol(path: str, source: str, symbol_id: str):
    return next(s for s in parse_file(path, source.encode()).symbols if s.symbol_id == symbol_id)


def test_the_first_sentence_of_a_docstring_is_the_query():
    assert first_sentence("Post an invoice entry into the ledger book.\n\nMore words.") == \
        "Post an invoice entry into the ledger book."
    assert first_sentence("Parse e.g. the header. Then the body.") == \
        "Parse e.g. the header."
    assert first_sentence("Render the forecast\nas text lines") == \
        "Render the forecast as text lines"


def test_a_symbol_is_indexed_without_its_docstring_and_keeps_its_code():
    method = symbol("billing.py", BILLING, "Ledger.post_invoice_entry")
    assert "Post an invoice entry" in method.text
    stripped = without_docstring(method.text, grammar_for("billing.py"))
    assert stripped == dedent('''\
        def post_invoice_entry(self, invoice, ledger_book):
            entry = ledger_book.new_entry(invoice)
            ledger_book.append(entry)
            return entry''')
    function = symbol("billing.py", BILLING, "compute_shipping_cost")
    assert "shipping cost of a parcel" not in without_docstring(function.text,
                                                                grammar_for("billing.py"))
    # a leading comment is above the definition, never in its text
    go = symbol("header.go", GO, "ParseHeader")
    assert go.doc and without_docstring(go.text, grammar_for("header.go")) == go.text
    assert "splits the header fields" not in go.text


def test_documented_functions_ask_their_first_sentence_and_judge_themselves_relevant():
    parsed = {"billing.py": parse_file("billing.py", BILLING.encode()),
              "header.go": parse_file("header.go", GO.encode())}
    dataset = code_search_dataset("tiny", parsed, max_symbols=100)
    assert dataset.queries == {
        "billing.py::Ledger.post_invoice_entry": "Post an invoice entry into the ledger book.",
        "billing.py::compute_shipping_cost":
            "Compute the shipping cost of a parcel over a distance.",
        "billing.py::render_weather_forecast":
            "Render the weather forecast of a city as text lines.",
        "header.go::ParseHeader": "ParseHeader splits the header fields of a request."}
    assert all(dataset.qrels[query] == {query: 1} for query in dataset.queries)
    assert set(dataset.corpus) >= {"billing.py::Ledger", "billing.py::short",
                                   "billing.py::test_shipping_cost_is_positive"}
    assert all("the query" not in text for _, text in dataset.corpus.values())
    sample = code_search_dataset("tiny", parsed, max_symbols=3)
    assert len(sample.corpus) == 3 and set(sample.queries) <= set(sample.corpus)


def test_mrr_and_recall_at_ten_count_the_first_relevant_documents_rank():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"d": 1, "e": 1}}
    ranking = {
        "q1": {"a": 9.0, "x": 1.0},                                    # rank 1
        "q2": {"x": 3.0, "b": 2.0, "y": 2.0},                          # rank 2 (tie: by id)
        "q3": {**{f"z{i:02}": 10.0 - i / 10 for i in range(10)}, "c": 0.5},  # rank 11: out
        "q4": {"x": 5.0, "y": 4.0, "z": 3.0, "e": 2.0},                # rank 4, half found
    }
    assert mrr_and_recall(ranking, qrels) == {
        "mrr_at_10": round((1 + 1 / 2 + 0 + 1 / 4) / 4, 4),
        "recall_at_10": round((1 + 1 + 0 + 0.5) / 4, 4)}
    assert mrr_and_recall(ranking, qrels, cutoff=1) == {"mrr_at_1": 0.25, "recall_at_1": 0.25}


def test_keyword_code_search_finds_each_documented_function_on_a_tiny_repository(
        tmp_path, sample_config):
    repo = Repo(tmp_path / "repo")
    repo.commit("billing", {"billing.py": BILLING, "header.go": GO, "mailer.js": MAILER})
    found = run_code_search(repo.path, sample_config, None, modes=("bm25",))
    assert (found["queries"], found["docstring_left_in_target"],
            found["query_in_other_documents"]) == (5, 0, 1)
    # the class holding the mailer method's comment comes first, the method second
    assert found["modes"] == {"keyword": {"mrr_at_10": 0.9, "recall_at_10": 1.0}}


def test_the_generated_repository_is_valid_source_in_three_languages_quickly(tmp_path):
    started = time.perf_counter()
    root = write_code_repository(tmp_path / "generated", 12)
    assert time.perf_counter() - started < 10
    paths = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                           text=True, check=True).stdout.split()
    assert len(paths) == 12 and {path.rsplit(".", 1)[1] for path in paths} == {"py", "go", "js"}
    calling_others = 0
    for path in paths:
        data = (root / path).read_bytes()
        assert MIN_LINES <= len(data.splitlines()) <= MAX_LINES + 1, path
        parsed = parse_file(path, data)
        assert (parsed.status, parsed.reason) == (PARSED, None), path
        own = {symbol.name for symbol in parsed.symbols}
        assert len(own) >= 4
        calls = {ref.name for ref in parsed.references if ref.kind == CALL}
        assert calls & own, f"{path} calls none of its own functions"
        calling_others += bool({name for name in calls - own if name.lower().startswith(
            "helper")})
    assert calling_others >= 10  # a file whose three picks were itself calls only its own


@pytest.mark.timeout(120)
def test_the_scale_benchmark_reparses_exactly_the_changed_file(tmp_path):
    result = run_scale_benchmark(9)
    assert result["files"] == 9 and result["symbols"] > 9 * 4
    assert result["runs"]["first"]["files_parsed"] == 9
    assert (result["files_reparsed"], result["noop_files_parsed"]) == (1, 0)
    assert result["runs"]["first"]["partial"] == 0
