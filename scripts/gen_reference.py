"""Generate the JobSpec reference (docs/jobspec.md) and JSON Schema (docs/jobspec.schema.json).

    python scripts/gen_reference.py          # rewrite both files
    python scripts/gen_reference.py --check  # exit 1 if either is stale (CI runs this through a unit test)

Why generated: ``runtime/spec.py`` (``JobSpec``, and the sections it
re-exports from ``runtime/spec_*.py``) is the one declaration of every job
parameter. Writing the reference by hand would drift from it the first time
someone adds a field; here every dataclass field of ``JobSpec`` and of every
spec class it nests is listed with its type, its default and its attribute
docstring (the string literal right under the field), so a new field shows up
by itself, and one without a docstring stops the generator.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_provider_tony.runtime import spec as model  # noqa: E402 - after the path is set

DOCS = REPO / "docs"
MARKDOWN = DOCS / "jobspec.md"
SCHEMA = DOCS / "jobspec.schema.json"

# What a type annotation cannot say: the schema keywords for these fields and
# classes come from the model's own constants, so they follow the model.
FIELD_SCHEMA: dict[str, dict[str, Any]] = {
    "JobSpec.roles": {"minProperties": 1, "propertyNames": {"pattern": model._ROLE_NAME.pattern}},
    "JobSpec.success_policy": {"enum": list(model.SUCCESS_POLICIES)},
    "JobSpec.tags": {"maxItems": model._MAX_TAGS},
    "JobSpec.name": {"minLength": 1, "maxLength": model._MAX_NAME_LEN},
    "JobSpec.inputs": {"propertyNames": {"pattern": model._INPUT_NAME.pattern}},
    "InputSpec.sharding": {"enum": list(model.SHARDING_POLICIES)},
    "EarlyStopping.rule": {"enum": [*model.STOPPING_RULES, None]},
    "EarlyStopping.mode": {"enum": list(model.GATE_MODES)},
    # Placement.coerce also takes the shorthands 'spread' and a list of hosts.
    "RoleSpec.placement": {
        "anyOf": [
            {"$ref": "#/$defs/Placement"},
            {"const": "spread"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "null"},
        ]
    },
}
CLASS_SCHEMA: dict[str, dict[str, Any]] = {
    "JobSpec": {"required": ["roles"]},
    "InputSpec": {"required": ["path"]},
    # Exactly one program; to_dict() writes the other two as null, so "given" means present and not null.
    "RoleSpec": {
        "oneOf": [
            {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
            for name in ("command", "module", "script")
        ]
    },
}
_SCALARS = {
    "str": ("string", "string"),
    "int": ("integer", "integer"),
    "float": ("number", "number"),
    "bool": ("boolean", "boolean"),
    "None": ("null", "null"),
}


def _memory_pattern() -> str:
    """The size strings ``parse_memory_mib`` accepts, as an ECMA-262 pattern (no inline flags there)."""
    units = sorted((u for u in model._UNITS if u), key=len, reverse=True)
    either_case = ["".join(f"[{c.lower()}{c.upper()}]" for c in unit) for unit in units]
    return rf"^\s*(\d+(\.\d*)?|\.\d+)\s*({'|'.join(either_case)})?\s*$"


# --------------------------------------------------------------------------- reading the model
def spec_classes() -> list[type[Any]]:
    """JobSpec, then every spec class reachable from its annotations, in the order first met."""
    order: list[type[Any]] = []
    todo: list[type[Any]] = [model.JobSpec]
    while todo:
        cls = todo.pop(0)
        if cls in order:
            continue
        order.append(cls)
        for f in dataclasses.fields(cls):
            todo += [c for c in _names(str(f.type)) if c is not None and c not in order]
    return order


def _names(annotation: str) -> list[type[Any] | None]:
    found = []
    for name in re.findall(r"[A-Za-z_]\w*", annotation):
        obj = getattr(model, name, None)
        found.append(obj if inspect.isclass(obj) and issubclass(obj, model.Model) else None)
    return found


def _text(doc: str) -> str:
    """Docstrings use reST's double backticks; Markdown and JSON readers expect single ones."""
    return doc.replace("``", "`")


def field_docs(cls: type[Any]) -> dict[str, str]:
    """Each field's attribute docstring: the string literal that follows it in the class body.

    Read along the MRO, base classes first, so a subclass inherits its base's docs.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        node = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        assert isinstance(node, ast.ClassDef), klass
        body = node.body
        for node, after in zip(body, [*body[1:], None], strict=True):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = _text(" ".join(after.value.value.split()))
    return docs


#: The default of a field that has none: the reference says "required" and the schema requires it.
REQUIRED = object()


def default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return REQUIRED
    return value.to_dict() if isinstance(value, model.Model) else value


def fields_of(cls: type[Any]) -> list[tuple[str, str, Any, str]]:
    """``(name, annotation, default, doc)`` per field; a field without a docstring is an error."""
    docs = field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name not in docs:
            home = next(k for k in cls.__mro__ if f.name in vars(k).get("__annotations__", {}))
            raise SystemExit(
                f"{cls.__name__}.{f.name} has no docstring: add a string literal on the line after the"
                f" field in {Path(inspect.getfile(home)).relative_to(REPO)} saying what it means"
            )
        out.append((f.name, str(f.type), default_of(f), docs[f.name]))
    return out


def _split_union(annotation: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            parts.append(annotation[start:i].strip())
            start = i + 1
    return [*parts, annotation[start:].strip()]


# --------------------------------------------------------------------------- JSON Schema
def type_schema(annotation: str) -> dict[str, Any]:
    options = _split_union(annotation)
    if len(options) > 1:
        schemas = [type_schema(o) for o in options]
        if all(set(s) == {"type"} for s in schemas):
            return {"type": [s["type"] for s in schemas]}
        return {"anyOf": schemas}
    ann = options[0]
    if ann in _SCALARS:
        return {"type": _SCALARS[ann][0]}
    if ann == "MiB":
        return {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": _memory_pattern()}]}
    generic = re.fullmatch(r"(list|dict)\[(.*)\]", ann)
    if generic and generic.group(1) == "list":
        return {"type": "array", "items": type_schema(generic.group(2))}
    if generic:
        key, _, value = generic.group(2).partition(",")
        assert key.strip() == "str", ann
        return {"type": "object", "additionalProperties": type_schema(value.strip())}
    cls = getattr(model, ann, None)
    if inspect.isclass(cls) and issubclass(cls, model.Model):
        return {"$ref": f"#/$defs/{ann}"}
    raise SystemExit(f"gen_reference.py does not know the type {ann!r}: teach type_schema() and type_text() it")


def class_schema(cls: type[Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required = list(CLASS_SCHEMA.get(cls.__name__, {}).get("required", []))
    for name, annotation, default, doc in fields_of(cls):
        props[name] = {
            "description": doc,
            **type_schema(annotation),
            **({} if default is REQUIRED else {"default": default}),
            **FIELD_SCHEMA.get(f"{cls.__name__}.{name}", {}),
        }
        if default is REQUIRED and name not in required:
            required.append(name)
    extra = {k: v for k, v in CLASS_SCHEMA.get(cls.__name__, {}).items() if k != "required"}
    return {
        "type": "object",
        "description": _class_summary(cls),
        "properties": props,
        "additionalProperties": False,
        **({"required": required} if required else {}),
        **extra,
    }


def schema() -> dict[str, Any]:
    classes = spec_classes()
    root = class_schema(classes[0])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "jobspec.schema.json",
        "title": "TonY JobSpec",
        **root,
        "$defs": {c.__name__: class_schema(c) for c in classes[1:]},
    }


# --------------------------------------------------------------------------- Markdown
def type_text(annotation: str) -> str:
    options = _split_union(annotation)
    if len(options) > 1:
        return " or ".join(type_text(o) for o in options)
    ann = options[0]
    if ann in _SCALARS:
        return _SCALARS[ann][1]
    if ann == "MiB":
        return 'MiB (integer) or a size such as "4 GiB"'
    generic = re.fullmatch(r"(list|dict)\[(.*)\]", ann)
    if generic and generic.group(1) == "list":
        return f"list of {type_text(generic.group(2))}"
    if generic:
        return f"map of string to {type_text(generic.group(2).partition(',')[2].strip())}"
    return f"[{ann}](#{ann.lower()})"


def _class_doc(cls: type[Any]) -> str:
    return _text(inspect.getdoc(cls) or "")


def _class_summary(cls: type[Any]) -> str:
    return " ".join(_class_doc(cls).split("\n\n")[0].split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    lines = [
        "# JobSpec reference",
        "",
        "<!-- Generated by scripts/gen_reference.py from airflow_provider_tony/runtime/spec.py; do not edit. -->",
        "",
        "A TonY job is one `JobSpec`: the `job=` of `TonyOperator`, or a YAML file for `tony submit` and",
        "`tony validate`. Unknown keys are refused; every error names the dotted field, the value and the fix.",
        "Editors can check YAML files against the JSON Schema beside this file,",
        "[jobspec.schema.json](jobspec.schema.json).",
        "",
    ]
    for cls in spec_classes():
        lines += [
            f"## {cls.__name__}",
            "",
            _class_doc(cls),
            "",
            "| field | type | default | meaning |",
            "|---|---|---|---|",
        ]
        for name, annotation, default, doc in fields_of(cls):
            if default is REQUIRED:
                shown = "required"
            elif isinstance(default, dict) and default and "$ref" in type_schema(annotation):
                shown = "see below"
            else:
                shown = f"`{json.dumps(default)}`"
            lines.append(f"| `{name}` | {_cell(type_text(annotation))} | {shown} | {_cell(doc)} |")
        lines.append("")
    return "\n".join(lines)


def render() -> dict[Path, str]:
    return {MARKDOWN: markdown(), SCHEMA: json.dumps(schema(), indent=2) + "\n"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a checked-in file differs; write nothing")
    args = parser.parse_args(argv)
    stale = [path for path, text in render().items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is stale: run python scripts/gen_reference.py", file=sys.stderr)
        return 1 if stale else 0
    DOCS.mkdir(exist_ok=True)
    for path, text in render().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
