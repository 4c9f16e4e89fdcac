"""``jarvis bench code --search``: code search measured CodeSearchNet-style (Husain et al.
2019, arXiv:1909.09436) on a real repository, through Jarvis's own chunking, keyword index
and vectors.

Every symbol at the repository's HEAD is a code document, as the code layer makes them (its
qualified name the title, its own code the text, chunked at statements by
``chunk_code``), with its docstring removed. Each documented function or method is a query:
the first sentence of its docstring, whose one relevant document is that function. As in
CodeSearchNet, a query has at least three words, and functions shorter than three lines
(without the docstring), tests (a name holding ``test``) and dunder methods (``__init__``,
``__str__``…) ask none.

Only a language with docstrings (Python) holds the doc in the symbol's text; a leading
comment (Go, JavaScript, Java…) lies above the definition, outside its text, so nothing is
removed there. ``docstring_left_in_target`` counts the queries whose sentence is still in
their target's indexed text: 0 unless the removal failed. ``query_in_other_documents``
counts those whose sentence is word for word in another document: a class whose text keeps
its methods' leading comments (TypeScript, Java…), a comment copied elsewhere.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import time
from pathlib import Path

from tree_sitter import Node, Parser

from jarvis_bench.code import head_files, parse_all
from jarvis_bench.evaluation import (
    CUTOFF,
    MODES,
    BeirDataset,
    Ranking,
    chunk_frame,
    dense_hits,
    eval_doc_key,
    keyword_hits,
    places,
    ranked_by_group,
)
from jarvis_core.config import JarvisConfig
from jarvis_core.sources.repo.code.languages import Grammar, grammar_for
from jarvis_core.sources.repo.code.model import FUNCTION, METHOD, SKIPPED, ParsedFile, Symbol
from jarvis_core.text.code_chunking import SYMBOL_SEPARATOR, chunk_code
from jarvis_core.text.tokens import token_counter
from jarvis_query.retrievers.grouping import DOCUMENT

MIN_QUERY_WORDS = 3
MIN_LINES = 3
DEFAULT_MAX_SYMBOLS = 2000
# The searches' names for the legs evaluation.py calls dense and bm25.
MODE_NAMES = {"bm25": "keyword", "dense": "semantic", "hybrid": "hybrid"}
_SENTENCE_END = re.compile(r"[.!?](?=\s+[^a-z]|$)")  # not "e.g. the"
_DUNDER = re.compile(r"^__\w+__$")


def first_sentence(doc: str) -> str:
    """The docstring's first sentence: its first paragraph up to the first full stop (or
    question, exclamation mark) that ends it or is followed by a space and no lower-case
    letter, whitespace collapsed."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = _SENTENCE_END.search(paragraph)
    return paragraph[:end.end()] if end else paragraph


def asks_a_query(symbol: Symbol, code: str) -> bool:
    """A documented function or method that CodeSearchNet's filters keep (``code`` is its
    text without the docstring)."""
    return (symbol.kind in (FUNCTION, METHOD) and bool(symbol.doc)
            and len(first_sentence(symbol.doc).split()) >= MIN_QUERY_WORDS
            and len(code.strip().splitlines()) >= MIN_LINES
            and "test" not in symbol.name.lower() and not _DUNDER.match(symbol.name))


def without_docstring(text: str, grammar: Grammar) -> str:
    """A symbol's code ``text`` without its docstring (the first statement of its body when
    that is a string, in a language with docstrings), the docstring's lines removed whole;
    any other text is returned as it is."""
    if not grammar.docstrings:
        return text
    data = text.encode()
    docstring = _docstring_statement(Parser(grammar.language).parse(data).root_node, grammar)
    if docstring is None:
        return text
    start, end = docstring.start_byte, docstring.end_byte
    line_start = data.rfind(b"\n", 0, start) + 1
    if not data[line_start:start].strip() and data[end:end + 1] in (b"\n", b""):
        start, end = line_start, end + 1
    return (data[:start] + data[end:]).decode("utf-8", "replace")


def _docstring_statement(root: Node, grammar: Grammar) -> Node | None:
    """The docstring of the first definition under ``root`` (the symbol's own: a nested
    definition's body is elided in a symbol's text)."""
    stack = [root]
    while stack:
        node = stack.pop()
        specs = grammar.definitions.get(node.type)
        if specs is not None:
            spec = specs[0] if isinstance(specs, tuple) else specs
            body = node.child_by_field_name(spec.body)
            first = body.named_children[:1] if body is not None else []
            if first and first[0].type == "expression_statement" and \
                    first[0].named_children[:1] and \
                    first[0].named_children[0].type == "string":
                return first[0]
            return None
        stack.extend(reversed(node.named_children))
    return None


def code_search_dataset(name: str, parsed: dict[str, ParsedFile],
                        max_symbols: int) -> BeirDataset:
    """The corpus (doc id ``<path>::<symbol id>`` -> qualified name, code without docstring),
    at most ``max_symbols`` symbols (a sample fixed by their ids' hashes when there are
    more), and the queries of the documented functions among them, each judging its own
    document relevant."""
    symbols = [(f"{path}{SYMBOL_SEPARATOR}{symbol.symbol_id}", path, symbol)
               for path, result in sorted(parsed.items()) if result.status != SKIPPED
               for symbol in result.symbols if symbol.text.strip()]
    if len(symbols) > max_symbols:
        symbols = sorted(symbols, key=lambda item: hashlib.sha256(
            item[0].encode()).hexdigest())[:max_symbols]
    corpus = {doc_id: (symbol.qualified_name, without_docstring(symbol.text, grammar_for(path)))
              for doc_id, path, symbol in symbols}
    queries = {doc_id: first_sentence(symbol.doc) for doc_id, _, symbol in symbols
               if asks_a_query(symbol, corpus[doc_id][1])}
    return BeirDataset(name, corpus, queries, {doc_id: {doc_id: 1} for doc_id in queries})


def mrr_and_recall(ranking: Ranking, qrels: dict[str, dict[str, int]],
                   cutoff: int = CUTOFF) -> dict[str, float]:
    """Mean reciprocal rank of the first relevant document in each query's top ``cutoff``
    (0 when none is there) and the share of its relevant documents there, averaged over the
    judged queries; ties in score are broken by document id, as trec_eval does."""
    reciprocal = recall = 0.0
    for query_id, judged in qrels.items():
        relevant = {doc for doc, grade in judged.items() if grade > 0}
        top = [doc for doc, _ in sorted(ranking.get(query_id, {}).items(),
                                        key=lambda item: (-item[1], item[0]))[:cutoff]]
        rank = next((at for at, doc in enumerate(top, 1) if doc in relevant), None)
        reciprocal += 1 / rank if rank else 0.0
        recall += len(relevant.intersection(top)) / len(relevant)
    count = len(qrels) or 1
    return {f"mrr_at_{cutoff}": round(reciprocal / count, 4),
            f"recall_at_{cutoff}": round(recall / count, 4)}


def _normalized(text: str) -> str:
    return " ".join(text.lower().split())


def run_code_search(repo: Path, config: JarvisConfig, embedder, *,
                    max_symbols: int = DEFAULT_MAX_SYMBOLS,
                    modes: tuple[str, ...] = MODES) -> dict:
    """MRR@10 and recall@10 by document (a symbol) for each of ``modes`` (keyword alone
    needs no ``embedder``), with the corpus's size and the time taken."""
    started = time.perf_counter()
    head, files = head_files(repo)
    parsed, _ = parse_all(files)
    dataset = code_search_dataset(repo.name, parsed, max_symbols)
    counter = token_counter(config.embedding.model, config.chunking.max_tokens)
    chunks = chunk_frame({doc_id: (title, chunk_code(
        text, title=title, path=doc_id, doc_key=eval_doc_key(doc_id), counter=counter))
        for doc_id, (title, text) in dataset.corpus.items()}, "code")
    legs = {}
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-code-search-") as tmp:
        if dataset.queries and {"dense", "hybrid"} & set(modes):
            legs["dense"] = dense_hits(dataset, chunks, embedder, Path(tmp) / "vectors")
        if dataset.queries and {"bm25", "hybrid"} & set(modes):
            legs["bm25"] = keyword_hits(dataset, chunks, Path(tmp) / "keyword")
    ranked = ranked_by_group(legs, modes, places(chunks)) if legs else {}
    own = {doc_id: _normalized(text) for doc_id, (_, text) in dataset.corpus.items()}
    everything = "\0".join(own.values())
    left = sum(_normalized(query) in own[doc_id] for doc_id, query in dataset.queries.items())
    elsewhere = sum(everything.count(_normalized(query)) > (_normalized(query) in own[doc_id])
                    for doc_id, query in dataset.queries.items())
    return {
        "repository": str(repo), "head": head,
        "symbols": sum(len(result.symbols) for result in parsed.values()),
        "documents": len(dataset.corpus), "chunks": chunks.height,
        "queries": len(dataset.queries), "docstring_left_in_target": left,
        "query_in_other_documents": elsewhere,
        "model": embedder and embedder.model,
        "modes": {MODE_NAMES[mode]: mrr_and_recall(by_group[DOCUMENT], dataset.qrels)
                  for mode, by_group in ranked.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }
