"""How pytest-xdist groups the tests into work units (``--dist loadfile``, pyproject.toml):
a file per unit, except the files that load sentence-transformers in the test process, which
share one. Importing it (with torch, transformers and scikit-learn) costs about 7 s of CPU
in each process that does; as one unit, one worker pays it once instead of up to three.

xdist's public hook (``pytest_xdist_make_scheduler``) takes a scheduler, and its schedulers
group by their private ``_split_scope``: tests/unit/test_scheduling.py fails when that
changes."""

from xdist.scheduler import LoadFileScheduling

SENTENCE_TRANSFORMERS_FILES = frozenset({
    "tests/e2e/test_query_encoder_equivalence.py",
    "tests/stores/test_embedder.py",
    "tests/unit/test_query_encoder.py",
})
SENTENCE_TRANSFORMERS_UNIT = "sentence-transformers"


class FileScheduling(LoadFileScheduling):
    """``--dist loadfile``, with the files of SENTENCE_TRANSFORMERS_FILES as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        return SENTENCE_TRANSFORMERS_UNIT if scope in SENTENCE_TRANSFORMERS_FILES else scope
