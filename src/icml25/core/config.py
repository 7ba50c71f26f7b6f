"""Study configuration: merge a study yaml's common keys with one scale, validate, build frozen dataclasses.

A study yaml has common keys plus ``scales: {smoke: {...}, default: {...}, paper: {...}}``. The merged mapping
(common, then the scale's overrides, then user overrides from ``config.yaml: overrides.<slug>``) is checked twice:
against the study's JSON schema in ``workflow/schemas/`` (at Snakemake parse time) and by :func:`build`, which
turns it into the study's frozen dataclass and rejects unknown or mistyped keys with their dotted path.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

T = TypeVar("T")

SCALES = ("smoke", "default", "paper")


class ConfigError(ValueError):
    """Invalid configuration; the message starts with the dotted path of the offending key."""


def load_yaml(path: str | Path) -> dict:
    """Read a yaml mapping; an empty file is ``{}``; anything but a mapping is a :class:`ConfigError`."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid yaml: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """Recursive merge: mappings merge key by key, everything else (lists included) is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def merge_scale(study: Mapping, scale: str, overrides: Mapping | None = None) -> dict:
    """Common keys of a study yaml, overridden by ``scales.<scale>`` and then by ``overrides``."""
    scales = study.get("scales", {})
    if scale not in scales:
        raise ConfigError(f"scales.{scale}: missing (this study defines {sorted(scales)})")
    common = {k: v for k, v in study.items() if k != "scales"}
    return deep_merge(deep_merge(common, scales[scale] or {}), overrides or {})


def retype_strings(data: Any) -> Any:
    """Re-read string leaves as yaml scalars: ``"4000"`` → 4000, ``"true"`` → True, ``"null"`` → None.

    ``snakemake --config 'overrides={cat_iv: {n: [4000]}}'`` parses nested values with yaml's BaseLoader, which
    keeps every scalar a string; this restores the types a config file would have. Strings that are not yaml
    scalars of another type (paths, URLs, names) are returned unchanged.
    """
    if isinstance(data, Mapping):
        return {k: retype_strings(v) for k, v in data.items()}
    if isinstance(data, list):
        return [retype_strings(v) for v in data]
    if isinstance(data, str):
        try:
            value = yaml.safe_load(data)
        except yaml.YAMLError:
            return data
        return value if isinstance(value, (int, float, bool)) or value is None else data
    return data


def validate_schema(data: Any, schema: Mapping | str | Path, what: str = "config") -> None:
    """Validate ``data`` against a JSON schema (mapping or yaml/json file); error names the failing key path."""
    import jsonschema

    if not isinstance(schema, Mapping):
        schema = load_yaml(schema)
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    while error is not None and error.context:  # anyOf/oneOf: report the most specific branch failure
        branch = [e for e in error.context if e.validator != "type"] or list(error.context)
        error = max(branch, key=lambda e: len(e.absolute_path))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise ConfigError(f"{what}: {where}: {error.message}")


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Build ``cls`` (a dataclass or a typing annotation) from plain data, strictly.

    Unknown keys, missing required keys and wrong types raise :class:`ConfigError` naming ``path``.
    Lists become tuples where the annotation says tuple; ints are accepted for floats; bools are never ints.
    """
    where = path or "<root>"
    if dataclasses.is_dataclass(cls):
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ConfigError(f"{_join(path, unknown[0])}: unknown key (allowed: {', '.join(sorted(fields))})")
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for name, field in fields.items():
            if name in data:
                kwargs[name] = build(hints[name], data[name], _join(path, name))
            elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{_join(path, name)}: required key missing")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as err:
            if isinstance(err, ConfigError):
                raise
            raise ConfigError(f"{where}: {err}") from err
    return _build_value(cls, data, path)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _build_value(tp: Any, data: Any, path: str) -> Any:
    where = path or "<root>"
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return data
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return build(arg, data, path)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {data!r} matches none of {tp}")
    if origin is Literal:
        if data not in args:
            raise ConfigError(f"{where}: {data!r} is not one of {list(args)}")
        return data
    if origin in (tuple, list):
        if not isinstance(data, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(data).__name__}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(data):
                raise ConfigError(f"{where}: expected {len(args)} items, got {len(data)}")
            return tuple(build(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
        item = args[0] if args else Any
        values = [build(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(values) if origin is tuple else values
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
        vt = args[1] if len(args) == 2 else Any
        return {str(k): build(vt, v, _join(path, k)) for k, v in data.items()}
    if tp is bool:
        if not isinstance(data, bool):
            raise ConfigError(f"{where}: expected true/false, got {data!r}")
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise ConfigError(f"{where}: expected an integer, got {data!r}")
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {data!r}")
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            raise ConfigError(f"{where}: expected a string, got {data!r}")
        return data
    if tp is type(None):
        if data is not None:
            raise ConfigError(f"{where}: expected null, got {data!r}")
        return None
    raise ConfigError(f"{where}: unsupported annotation {tp!r}")


def to_dict(obj: Any) -> Any:
    """Plain (json-able) data from a dataclass config: tuples become lists."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def flatten(data: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists stay values (MLflow params)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name))
        else:
            out[name] = value
    return out


def config_hash(data: Any) -> str:
    """First 12 hex digits of the sha256 of the canonical json of ``data`` (dataclass or plain)."""
    blob = json.dumps(to_dict(data), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
