"""Reading a service definition document: YAML or JSON bytes to plain data, with errors users can act on."""

from __future__ import annotations

import json
from typing import Any

import yaml

from app.errors import BadRequest, UnsupportedMediaType, ValidationFailed

JSON_TYPES = {"application/json"}
YAML_TYPES = {"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain", ""}


class _NoAliasLoader(yaml.SafeLoader):
    """Safe loading without anchors and aliases: nested aliases can expand a small file into billions of nodes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(None, None, "anchors and aliases are not supported", event.start_mark)
        return super().compose_node(parent, index)


def parse_document(body: bytes, content_type: str | None) -> dict[str, Any]:
    media_type = (content_type or "").split(";")[0].strip().lower()
    if media_type not in JSON_TYPES | YAML_TYPES:
        raise UnsupportedMediaType(
            f"send the service definition as application/json or application/yaml, not {media_type}",
            accepted=sorted(JSON_TYPES | (YAML_TYPES - {""})),
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the document is not UTF-8 text (byte {exc.start})", code="malformed_document") from exc
    if not text.strip():
        raise BadRequest("the document is empty", code="malformed_document")
    try:
        data = _load_json(text) if media_type in JSON_TYPES else _load_yaml(text)
    except RecursionError as exc:
        raise BadRequest("the document nests too deeply", code="malformed_document") from exc
    if not isinstance(data, dict):
        raise ValidationFailed([{"path": "(root)", "message": "the service definition must be a mapping of fields"}])
    return data


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            code="malformed_document",
            line=exc.lineno,
            column=exc.colno,
        ) from exc


def _load_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = {"line": mark.line + 1, "column": mark.column + 1} if mark else {}
        position = f" at line {where['line']}, column {where['column']}" if where else ""
        raise BadRequest(f"malformed YAML{position}: {exc.problem or exc.context}", code="malformed_document", **where) from exc
    except yaml.YAMLError as exc:
        raise BadRequest(f"malformed YAML: {exc}", code="malformed_document") from exc
