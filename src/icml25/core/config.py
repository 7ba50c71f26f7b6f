"""Study configuration: one pydantic model per study is the single definition of every key.

A study yaml has common keys plus ``scales: {smoke: {...}, default: {...}, paper: {...}}``. The merged mapping
(common, then the scale's overrides, then user overrides from ``config.yaml: overrides.<slug>``) is validated by
the study's ``Config`` model (:class:`StudyConfig` subclass: frozen, unknown keys forbidden, strict types,
bounds and cross-key validators), whose errors name the dotted key path (``cat_iv.real.cardrows: unknown key``).
The JSON schema of the study yaml is generated from the model (:func:`study_schema`), never written by hand.

Each study also declares, next to its model, which keys each stage reads (``STAGE_KEYS``). Snakemake passes
each rule only those keys as params (:func:`stage_params`), so a change reruns only the stages that read it, and
the stage function sees the config through a :class:`StageView` that refuses undeclared keys.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, model_validator

T = TypeVar("T", bound=BaseModel)

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


# ------------------------------------------------------------------------------------------------ models


class Section(BaseModel):
    """Base of a nested group of keys (``real:``, ``sim:``...): frozen, unknown keys forbidden, strict types.

    Strict validation of json-like data: lists become tuples, ints are accepted for floats, but a string is never
    a number and a bool never an int (``--config`` strings are retyped first by :func:`retype_strings`).
    Every field of a section needs a default, so that a scale may override one key of it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, use_attribute_docstrings=True)


class StudyConfig(Section):
    """Base of a study's ``Config``: the keys every study has (``arms`` is declared by the study, with its own
    ``Literal`` arm names: ``arms: tuple[Arm, ...] = Field(min_length=1, description=...)``)."""

    seeds: tuple[NonNegativeInt, ...] = Field(min_length=1, description="seeds of the trained arms (distinct)")
    seeds_per_job: int | None = Field(
        None, ge=1, description="seeds per train job; null: all seeds of an arm in one job (each job pays start-up)")

    @model_validator(mode="after")
    def _distinct_seeds_and_arms(self):
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds: duplicates")
        arms = getattr(self, "arms", ())
        if len(set(arms)) != len(arms):
            raise ValueError("arms: duplicates")
        return self


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Validate plain (json-like) ``data`` into the model ``cls``; :class:`ConfigError` names every bad key.

    The message has one line per error, sorted by key path (:func:`_loc_key`, so the order does not depend on
    pydantic's version), each starting with the dotted key path under ``path``:
    ``cat_iv.real.cardrows: unknown key (allowed: ...)``, ``cat_iv.n[0]: Input should be greater than or equal
    to 10``; errors of cross-key validators name the model's path and the keys in their message.
    """
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or '<root>'}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
    try:
        blob = json.dumps(data, default=str)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path or '<root>'}: not json-like data: {err}") from err
    try:
        return cls.model_validate_json(blob)
    except ValidationError as err:
        raise ConfigError("\n".join(_error_line(cls, e, path) for e in ordered_errors(err.errors()))) from None


def ordered_errors(errors: Sequence[Mapping]) -> list[Mapping]:
    """Validation errors in the project's order, whatever order the installed pydantic reports them in: sorted
    by key path, key names alphabetically and list indices numerically, a key's own error after those of the keys
    under it (``arms[0]: ...`` before ``arms: too short``); errors at one path keep their order (stable sort)."""
    def key(error: Mapping) -> tuple:
        return (*((1, p, "") if isinstance(p, int) else (0, 0, str(p)) for p in error["loc"]), (2, 0, ""))
    return sorted(errors, key=key)


def _error_line(cls: type[BaseModel], error: Mapping, path: str) -> str:
    loc = tuple(error["loc"])
    where = path
    for part in loc:
        where = f"{where}[{part}]" if isinstance(part, int) else (f"{where}.{part}" if where else str(part))
    where = where or "<root>"
    kind, msg = error["type"], error["msg"]
    if kind == "extra_forbidden":
        allowed = sorted(_model_at(cls, loc[:-1]).model_fields) if _model_at(cls, loc[:-1]) else []
        return f"{where}: unknown key (allowed: {', '.join(allowed)})"
    if kind == "missing":
        return f"{where}: required key missing"
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
    return f"{where}: {msg}" + ("" if kind == "value_error" else f", got {error.get('input')!r}")


def _model_at(cls: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The nested model class at a key path (None if the path leaves the models)."""
    for part in loc:
        field = cls.model_fields.get(part) if isinstance(part, str) else None
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        cls = ann
    return cls


def study_schema(cls: type[BaseModel], title: str = "") -> dict:
    """JSON schema (draft 2020-12) of a study yaml, generated from its ``Config``: the model's keys at the top
    level, plus ``scales.{smoke,default,paper}`` each overriding any of them (null: no override)."""
    schema = cls.model_json_schema()
    defs = schema.pop("$defs", {})
    keys = {"type": "object", "properties": schema["properties"], "additionalProperties": False}
    scale = {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/scale_overrides"}]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title or schema.get("title", cls.__name__),
        "description": (f"{title}: generated from {cls.__module__}.{cls.__qualname__}; common keys, then "
                        "scales.<scale> overriding any of them"),
        "$defs": {**defs, "scale_overrides": keys},
        "type": "object",
        "properties": {**schema["properties"],
                       "scales": {"type": "object", "additionalProperties": False, "required": list(SCALES),
                                  "properties": {s: scale for s in SCALES}}},
        "required": [*schema.get("required", []), "scales"],
        "additionalProperties": False,
    }


# ------------------------------------------------------------------------------------------- stage keys


def check_stage_keys(cls: type[BaseModel], stage_keys: Mapping[str, Iterable[str]]) -> None:
    """Every declared key path names a field of ``cls`` (nested paths through sections): ConfigError if not."""
    for stage, keys in stage_keys.items():
        for key in keys:
            model: Any = cls
            for part in key.split("."):
                if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
                    raise ConfigError(f"STAGE_KEYS[{stage!r}]: {key!r} is not a key of {cls.__module__}.Config")
                model = model.model_fields[part].annotation


def stage_subset(data: Mapping, keys: Iterable[str]) -> dict:
    """The part of the plain config ``data`` under the dotted ``keys`` (nested mappings kept nested)."""
    out: dict = {}
    for key in sorted(keys):
        *parents, leaf = key.split(".")
        src, dst = data, out
        for part in parents:
            src = src[part]
            dst = dst.setdefault(part, {})
        dst[leaf] = src[leaf]
    return out


def stage_params(data: Mapping, keys: Iterable[str]) -> dict[str, str]:
    """Snakemake params of a stage: one ``"<dotted key>=<json value>"`` string per leaf key it reads.

    Snakemake reruns a job whose params changed and names the params that differ (``before: 'alpha=0.05'
    now: 'alpha=0.1'``), so one param per leaf key makes the rerun reason name exactly the changed keys.
    The param names (``k0, k1, ...``) are positional: only the values matter to the rerun trigger.
    """
    flat = flatten(stage_subset(data, keys))
    return {f"k{i}": f"{key}={json.dumps(value, separators=(',', ':'))}"
            for i, (key, value) in enumerate(sorted(flat.items()))}


class UndeclaredKeyError(ConfigError):
    """A stage read a config key its ``STAGE_KEYS`` entry does not declare."""


class StageView:
    """Read-only view of a study config that exposes only the keys a stage declares.

    ``view.real.card_rows`` works if ``real`` or ``real.card_rows`` is declared, and raises
    :class:`UndeclaredKeyError` otherwise: a stage that reads a key without declaring it would not be rerun when
    the key changes. Properties and methods of the models are evaluated on the view, so what they read is
    checked too.
    """

    __slots__ = ("_obj", "_keys", "_path", "_who")

    def __init__(self, obj: BaseModel, keys: Iterable[str], who: str = "stage", path: str = ""):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_keys", frozenset(keys))
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_who", who)

    def __getattr__(self, name: str) -> Any:
        obj, keys, path, who = self._obj, self._keys, self._path, self._who
        full = f"{path}.{name}" if path else name
        if name in type(obj).model_fields:
            if any(full == k or full.startswith(k + ".") for k in keys):
                return getattr(obj, name)
            if any(k.startswith(full + ".") for k in keys):
                return StageView(getattr(obj, name), keys, who, full)
            raise UndeclaredKeyError(
                f"{who} reads config key {full!r}, which its STAGE_KEYS entry does not declare (declared: "
                f"{sorted(keys) or 'none'}); declare it in the study's config.py so a change of it reruns the stage")
        attr = getattr(type(obj), name, None)
        if isinstance(attr, property):
            return attr.fget(self)
        if callable(attr) and name in vars(type(obj)) and not name.startswith("_"):
            return attr.__get__(self)
        raise AttributeError(f"{who}: {type(obj).__name__} view has no key {full!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the config is read-only")

    def __repr__(self) -> str:
        return f"StageView({self._who}, {self._path or type(self._obj).__name__}, keys={sorted(self._keys)})"


def unwrap(obj: Any) -> Any:
    """The model behind a :class:`StageView` (anything else unchanged)."""
    return object.__getattribute__(obj, "_obj") if isinstance(obj, StageView) else obj


# ------------------------------------------------------------------------------------------- plain data


def to_dict(obj: Any) -> Any:
    """Plain (json-able) data from a model, a :class:`StageView` (its whole model) or plain data."""
    obj = unwrap(obj)
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
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
    """First 12 hex digits of the sha256 of the canonical json of ``data`` (model, view or plain)."""
    blob = json.dumps(to_dict(data), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
