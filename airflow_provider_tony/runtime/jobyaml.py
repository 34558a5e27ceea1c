"""Reading a job file's YAML strictly: the one loader ``tony``, the operator and ``JobSpec.from_yaml`` use.

Why not ``yaml.safe_load``: it takes the last of two equal keys silently (a
second ``queue:`` further down wins unseen), expands aliases without limit (a
1.6 KB "billion laughs" file costs minutes and gigabytes before any error),
and recurses once per nesting level (5,000 brackets end in a
``RecursionError`` traceback). A job file needs none of those: here an alias,
a repeated key, nesting deeper than ``MAX_DEPTH`` or a file over ``MAX_BYTES``
is refused at once, with the line and column, before anything is built.

Errors are PyYAML's own ``MarkedYAMLError`` (``JobYamlError``), so a caller
that reports YAML errors by their mark reports these the same way.

Like the rest of ``runtime/``, this module imports only the standard library and PyYAML.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node

from airflow_provider_tony.runtime.errors import TonyError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "JobYamlError", "load"]

#: The largest job file read: a JobSpec travels in one environment variable of at
#: most 128 KiB, so its JSON is capped at 64 KiB (``spec.MAX_SPEC_BYTES``); a bigger file
#: could never be a job, and refusing it first keeps ``tony validate`` well under a second.
MAX_BYTES = 128 * 1024
#: The deepest nesting of mappings and lists: a JobSpec nests five levels
#: (roles.worker.placement.nodes[i]); the margin is for the mistakes that get a clear error.
MAX_DEPTH = 32


class JobYamlError(ComposerError, TonyError):
    """A job file's YAML refused for its shape (alias, repeated key, depth, size), with its position."""


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses aliases, repeated keys and deep nesting while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # Refused while scanning: PyYAML's scanner reads a whole flow collection ahead
        # (quadratic in its depth) before the composer sees its first node.
        super().fetch_flow_collection_start(token_class)
        if self.flow_level > MAX_DEPTH:
            raise JobYamlError(
                None,
                None,
                f"brackets nested more than {MAX_DEPTH} levels deep; a JobSpec nests a few levels, flatten the value",
                self.get_mark(),
            )

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise JobYamlError(
                None,
                None,
                f"an alias (*{str(event.anchor)[:40]}) is not allowed in a job file; write the value out"
                " (aliases let a few bytes expand into gigabytes)",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise JobYamlError(
                    None,
                    None,
                    f"nested more than {MAX_DEPTH} levels deep; a JobSpec nests a few levels, flatten the value",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader's own error says it
                break
            if first is not None:
                raise JobYamlError(
                    "in a mapping",
                    node.start_mark,
                    f"key {str(key)[:80]!r} appears twice (first on line {first.start_mark.line + 1});"
                    " keep one of them (YAML would silently use the last)",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def load(text: str) -> Any:
    """The YAML document in ``text`` as builtins; :class:`JobYamlError` (a ``yaml.YAMLError``) if refused."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        mark = yaml.Mark("<job>", 0, 0, 0, "", 0)
        raise JobYamlError(None, None, f"{size} bytes, more than the {MAX_BYTES} a job file may hold", mark)
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
