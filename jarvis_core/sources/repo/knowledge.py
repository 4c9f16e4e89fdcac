"""The `.jarvis` knowledge files of a repository: components, their owners, paths and relations."""

from __future__ import annotations

import json

import yaml

KNOWLEDGE_SUFFIXES = (".yaml", ".yml")


KNOWLEDGE_VERSION = 1  # bump when the interpretation of .jarvis YAML changes


def is_knowledge_file(path: str, knowledge_dir: str) -> bool:
    folder = knowledge_dir.strip("/")
    return bool(folder) and path.startswith(folder + "/") and path.endswith(KNOWLEDGE_SUFFIXES)


RELATION_FIELDS = {"depends_on": "DEPENDS_ON", "part_of": "PART_OF", "uses": "USES",
                   "calls": "CALLS", "provides": "PROVIDES", "consumes": "CONSUMES",
                   "replaces": "REPLACES", "related": "RELATED_TO"}


_COMPONENT_FIELDS = {"name", "description", "owners", "paths", "relations", *RELATION_FIELDS}


def _names(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"{where} must be a name or a list of names")


def parse_knowledge(text: str) -> list[dict]:
    """Components declared in a ``.jarvis`` YAML file, normalised and sorted:
    ``{name, description, owners, paths, relations: [(RELATION, target)]}``.

    The file holds ``components:`` (a list of mappings with ``name`` and optional
    ``description``, ``owners``, ``paths``, relation fields such as ``depends_on`` and
    ``part_of``, and ``relations: [{type, target}]`` for any other relation). Raises
    ValueError saying what is wrong."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {exc}") from exc
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("components", []), list):
        raise ValueError("the top level must be a mapping with a 'components' list")
    components = {}
    for index, item in enumerate(data.get("components") or []):
        where = f"components[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not item["name"].strip():
            raise ValueError(f"{where} must be a mapping with a 'name'")
        unknown = sorted(set(item) - _COMPONENT_FIELDS)
        if unknown:
            raise ValueError(f"{where} ({item['name']}): unknown field(s) {', '.join(unknown)}")
        relations = {(RELATION_FIELDS[name], target) for name in RELATION_FIELDS
                     for target in _names(item.get(name), f"{where}.{name}")}
        for at, relation in enumerate(item.get("relations") or []):
            if not isinstance(relation, dict) or not {"type", "target"} <= set(relation):
                raise ValueError(f"{where}.relations[{at}] needs 'type' and 'target'")
            kind = str(relation["type"]).strip().upper().replace(" ", "_").replace("-", "_")
            relations.add((kind, str(relation["target"])))
        description = item.get("description")
        components[item["name"].strip()] = {
            "name": item["name"].strip(),
            "description": description.strip() if isinstance(description, str) else None,
            "owners": sorted(_names(item.get("owners"), f"{where}.owners")),
            "paths": sorted(_names(item.get("paths"), f"{where}.paths")),
            "relations": sorted(relations)}
    return [components[name] for name in sorted(components)]


def knowledge_json(components: list[dict]) -> str:
    return json.dumps({"version": KNOWLEDGE_VERSION, "components": components},
                      sort_keys=True, ensure_ascii=False)
