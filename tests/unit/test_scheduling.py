"""The work units xdist makes of the suite (tests/scheduling.py), through xdist's own
scheduler: it groups by the private ``_split_scope`` this overrides, so a change there fails
here, not silently in CI time."""

from types import SimpleNamespace

from tests.conftest import pytest_xdist_make_scheduler
from tests.pipeline_helpers import PROJECT_ROOT
from tests.scheduling import SENTENCE_TRANSFORMERS_FILES, FileScheduling

COLLECTION = [
    "tests/e2e/test_cli.py::test_help",
    "tests/e2e/test_query_encoder_equivalence.py::test_token_ids",
    "tests/e2e/test_query_encoder_equivalence.py::test_vectors[openvino-32]",
    "tests/dagster/test_pipeline.py::test_first_run",
    "tests/stores/test_embedder.py::test_reports_the_model_shape",
    "tests/stores/test_graph_store_contract.py::test_nodes",
    "tests/unit/test_query_encoder.py::test_export",
    "tests/unit/test_chunking.py::test_headings",
]


class Worker:
    """What the scheduler calls on a worker: each unit sent is one call."""

    def __init__(self, number: int):
        self.gateway = SimpleNamespace(id=f"gw{number}")
        self.units: list[list[str]] = []
        self.finished = 0
        self.shutting_down = False

    def send_runtest_some(self, indexes):
        self.units.append([COLLECTION[index] for index in indexes])

    def shutdown(self):
        self.shutting_down = True


def config(dist="loadfile", workers=2):
    values = {"dist": dist, "tx": [f"{workers}*popen"]}
    return SimpleNamespace(getvalue=values.__getitem__,
                           option=SimpleNamespace(loadscopereorder=False))


def units_sent(workers=2) -> list[list[str]]:
    """Every unit the scheduler sends, each worker finishing what it was sent in turn."""
    scheduler = pytest_xdist_make_scheduler(config(workers=workers), log=None)
    nodes = [Worker(number) for number in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, COLLECTION)
    scheduler.schedule()
    for _ in range(len(COLLECTION)):  # at least one test finishes a round
        for node in nodes:
            for nodeid in [n for unit in node.units for n in unit][node.finished:]:
                node.finished += 1
                scheduler.mark_test_complete(node, COLLECTION.index(nodeid))
        if scheduler.tests_finished:
            break
    return [unit for node in nodes for unit in node.units]


def test_the_sentence_transformers_files_are_one_unit_and_every_other_file_its_own():
    units = units_sent()
    files = [sorted({nodeid.split("::")[0] for nodeid in unit}) for unit in units]
    assert sorted(SENTENCE_TRANSFORMERS_FILES) in files
    others = [file for unit in files if unit != sorted(SENTENCE_TRANSFORMERS_FILES)
              for file in unit]
    assert len(others) == len(set(others)) == 4  # one unit per file
    assert sorted(nodeid for unit in units for nodeid in unit) == sorted(COLLECTION)
    joined = next(unit for unit in units
                  if any(n.startswith("tests/stores/test_embedder.py") for n in unit))
    assert joined == [n for n in COLLECTION if n.split("::")[0] in SENTENCE_TRANSFORMERS_FILES]


def test_only_loadfile_is_changed():
    assert isinstance(pytest_xdist_make_scheduler(config(), log=None), FileScheduling)
    assert pytest_xdist_make_scheduler(config("load"), log=None) is None


def test_the_files_named_exist():
    assert [f for f in SENTENCE_TRANSFORMERS_FILES if not (PROJECT_ROOT / f).is_file()] == []
