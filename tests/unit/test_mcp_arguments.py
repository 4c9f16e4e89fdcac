"""The MCP tools' parameter types: numbers and booleans typed into a client's form arrive as
text and are taken; everything else stays strict, and the schemas do not change."""

import pytest
from pydantic import BaseModel, ValidationError

from jarvis_query import mcp_arguments as arg


class Arguments(BaseModel):
    limit: arg.Limit = 10
    depth: arg.Depth = 1
    max_tokens: arg.MaxTokens = 6500
    alpha: arg.Alpha = None
    similarity_threshold: arg.SimilarityThreshold = None
    search_content: arg.SearchContent = False


def test_numbers_and_booleans_as_text_are_taken():
    taken = Arguments(limit="10", depth=" 2 ", max_tokens="+500", alpha="0.5",
                      similarity_threshold="-1", search_content="TRUE")
    assert (taken.limit, taken.depth, taken.max_tokens) == (10, 2, 500)
    assert (taken.alpha, taken.similarity_threshold, taken.search_content) == (0.5, -1.0, True)
    assert Arguments(alpha=".25", search_content="false").model_dump(
        include={"alpha", "search_content"}) == {"alpha": 0.25, "search_content": False}
    assert Arguments(limit=3, alpha=1, search_content=True).alpha == 1.0


@pytest.mark.parametrize(("field", "value", "message"), [
    ("limit", "ten", "Input should be a valid integer"),
    ("limit", "2.5", "Input should be a valid integer"),
    ("limit", True, "Input should be a valid integer"),
    ("limit", 2.0, "Input should be a valid integer"),
    ("depth", "", "Input should be a valid integer"),
    ("alpha", "ten", "Input should be a valid number"),
    ("alpha", "nan", "Input should be a valid number"),
    ("alpha", True, "Input should be a valid number"),
    ("similarity_threshold", "0.5.1", "Input should be a valid number"),
    ("search_content", "yes", "Input should be a valid boolean"),
    ("search_content", 1, "Input should be a valid boolean"),
])
def test_everything_else_is_refused(field, value, message):
    with pytest.raises(ValidationError) as refused:
        Arguments(**{field: value})
    assert refused.value.errors()[0]["msg"].startswith(message)


def test_schemas_keep_their_types_and_ranges():
    properties = Arguments.model_json_schema()["properties"]
    assert properties["limit"].items() >= {"type": "integer", "minimum": 1, "maximum": 50,
                                           "default": 10}.items()
    assert properties["depth"].items() >= {"type": "integer", "minimum": 1,
                                           "maximum": 3}.items()
    assert properties["alpha"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert properties["search_content"]["type"] == "boolean"
