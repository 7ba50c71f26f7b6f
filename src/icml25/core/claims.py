"""Claims: the ``claims.json`` format every study's evaluate stage writes, and the statistics behind verdicts.

Each entry is one of two kinds:

* a **claim** (``kind="claim"``): something a paper states (``source="paper"``) or our illustration of it
  (``source="ours"``), decided from measured outcomes on held-out data;
* a **check** (``kind="check"``): an identity, invariant or mechanism that must hold by mathematics or by
  construction. A failing check is a bug, never a finding; a check's verdict is ``reproduced`` when it holds and
  ``not reproduced`` when it fails, with ``holds`` beside it (``None`` if it could not be computed).

An entry records the statement (and a short ``title`` for tables), which data the verdict rests on, the metric
per arm (mean and bootstrap CI over seeds), the test and threshold in words, the computed statistic, the few
``key_numbers`` that decide it, its :class:`Evidence` and the verdict. Verdicts come only from :func:`verdict`
applied to computed booleans, then the **evidence rules** of :func:`apply_evidence_rules` (one place for every
study): a claim is ``reproduced`` or ``not reproduced`` only with at least :data:`MIN_UNITS` independent units
(seeds, functions, test windows, runs, ...) and, when its statement is about the paper's data, only on the paper's
data; otherwise it is ``inconclusive`` with a note naming the rule. Checks are not gated: they hold or fail at any
scale. :func:`validate_claims` rejects documents that break the rules, so a one-seed run cannot carry a claim
verdict other than ``inconclusive``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .io import read_json, write_json

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
CLAIM, CHECK = "claim", "check"
KINDS = (CLAIM, CHECK)
MIN_UNITS = 3  # evidence rule: independent units (seeds, functions, windows, runs) a claim verdict needs
COUNT_KEYS = ("claims_reproduced", "claims_not_reproduced", "claims_inconclusive", "checks_hold", "checks_failed")

CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["study", "scale", "data_source", "claims"],
    "properties": {
        "study": {"type": "string"},
        "scale": {"enum": ["smoke", "default", "paper"]},
        "data_source": {"type": "string"},
        "config_hash": {"type": "string"},
        "paper": {"type": "object", "properties": {"title": {"type": "string"}, "ref": {"type": "string"}}},
        "seeds": {"type": "array", "items": {"type": "integer"}},
        "claims": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "kind", "statement", "source", "data", "metrics", "test", "threshold",
                             "statistic", "verdict", "evidence"],
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "kind": {"enum": list(KINDS)},
                    "title": {"type": "string"},
                    "statement": {"type": "string", "minLength": 1},
                    "source": {"enum": ["paper", "ours"]},
                    "data": {"type": "string"},
                    "metrics": {"type": "object", "additionalProperties": {
                        "type": "object", "required": ["mean"],
                        "properties": {"mean": {"type": ["number", "null"]}}}},
                    "test": {"type": "string"},
                    "threshold": {"type": "string"},
                    "statistic": {},
                    "verdict": {"enum": list(VERDICTS)},
                    "holds": {"type": ["boolean", "null"]},
                    "key_numbers": {"type": "object"},
                    "evidence": {
                        "type": "object", "required": ["n", "unit", "paper_data"],
                        "properties": {"n": {"type": "integer", "minimum": 0}, "unit": {"type": "string"},
                                       "paper_data": {"type": ["boolean", "null"]}}},
                    "note": {"type": "string"},
                },
            },
        },
    },
}


def verdict(reproduced: bool, not_reproduced: bool = False) -> str:
    """Map computed test outcomes to a verdict; ``reproduced`` wins only if ``not_reproduced`` is False."""
    if reproduced and not not_reproduced:
        return REPRODUCED
    if not_reproduced:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, n_resamples: int = 2000, level: float = 0.95,
                 seed: int = 0, statistic=np.mean) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over a 1-D sample (e.g. one value per seed).

    Deterministic for a given ``seed``. A sample of size 1 gives a degenerate (point) interval; NaNs raise.
    """
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("bootstrap_ci: empty sample")
    if np.isnan(x).any():
        raise ValueError("bootstrap_ci: sample contains NaN")
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    stats = statistic(x[idx], axis=1)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


def summarize(values: Sequence[float] | np.ndarray, **kwargs: Any) -> dict[str, float]:
    """``{mean, ci_low, ci_high, std, n}`` of a per-seed sample, CI by :func:`bootstrap_ci`."""
    x = np.asarray(values, dtype=float).ravel()
    low, high = bootstrap_ci(x, **kwargs)
    return {"mean": float(x.mean()), "ci_low": low, "ci_high": high,
            "std": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n": int(x.size)}


def paired_differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    """``a - b`` for per-seed paired samples; lengths must match (same seeds in the same order)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_differences: unequal lengths {a.size} and {b.size}")
    return a - b


@dataclass(frozen=True)
class Evidence:
    """What a verdict rests on: ``n`` independent ``unit``s (seeds, functions, windows, runs, cases, ...), and,
    for a statement about the paper's data, whether the paper's data was used (``paper_data``: True = yes,
    False = a stand-in such as a synthetic copy; None = the statement is not about the paper's data)."""

    n: int
    unit: str = "seeds"
    paper_data: bool | None = None


def evidence_rule(kind: str, evidence: Evidence) -> str:
    """The evidence rule a claim breaks, in words ("" if none). Checks are never gated."""
    if kind == CHECK:
        return ""
    if evidence.n < MIN_UNITS:
        return (f"evidence rule: {evidence.n} independent {evidence.unit} < {MIN_UNITS} needed for a "
                "claim verdict")
    if evidence.paper_data is False:
        return "evidence rule: the statement is about the paper's data, which this run did not use"
    return ""


def apply_evidence_rules(kind: str, computed: str, evidence: Evidence) -> tuple[str, str]:
    """``(verdict, note)``: ``computed`` unless a claim breaks an evidence rule, then ``inconclusive`` with a note
    naming the rule and what the test alone gave."""
    rule = evidence_rule(kind, evidence)
    if rule and computed != INCONCLUSIVE:
        return INCONCLUSIVE, f"{rule} (the test alone gives {computed!r})"
    return computed, ""


@dataclass
class Claim:
    """One entry's computed outcome (a claim or a check); see :data:`CLAIMS_SCHEMA` and the module docstring.

    ``verdict`` is the test's outcome; for ``kind="claim"`` the evidence rules are applied on construction
    (the verdict becomes ``inconclusive`` and the note says why), and ``holds`` is set for checks.
    """

    id: str
    statement: str
    source: Literal["paper", "ours"]
    data: str
    test: str
    threshold: str
    verdict: str
    statistic: Any = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str = ""
    kind: Literal["claim", "check"] = CLAIM
    evidence: Evidence = field(default_factory=lambda: Evidence(0))
    title: str = ""
    key_numbers: dict[str, Any] = field(default_factory=dict)
    holds: bool | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.evidence, Evidence):
            self.evidence = Evidence(**self.evidence)
        if self.kind == CHECK:
            self.holds = None if self.verdict == INCONCLUSIVE else self.verdict == REPRODUCED
            return
        self.holds = None
        self.verdict, rule_note = apply_evidence_rules(self.kind, self.verdict, self.evidence)
        if rule_note:
            own = self.note.strip().rstrip(".;")  # "own note; evidence rule: ..." reads as two clauses
            self.note = f"{own}; {rule_note}." if own else f"{rule_note}."


def check(id: str, statement: str, *, holds: bool | None, data: str, test: str, threshold: str,
          evidence: Evidence, **kwargs: Any) -> Claim:
    """A check entry (identity, invariant, mechanism): verdict from ``holds`` (None: could not be computed)."""
    v = INCONCLUSIVE if holds is None else verdict(bool(holds), not holds)
    return Claim(id=id, statement=statement, source=kwargs.pop("source", "ours"), data=data, test=test,
                 threshold=threshold, verdict=v, kind=CHECK, evidence=evidence, **kwargs)


def verdict_counts(doc: Mapping[str, Any], source: str | None = None) -> dict[str, int]:
    """``{claims_reproduced, claims_not_reproduced, claims_inconclusive, checks_hold, checks_failed}`` of one
    claims document (or of ``{"claims": [...entries of several documents...]}``). ``source`` ("paper" or
    "ours") restricts the claim counts to one source; checks are counted regardless. A check that could not be
    computed (``holds`` null) counts in neither check key."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    for c in doc["claims"]:
        if c.get("kind", CLAIM) == CHECK:
            if c.get("holds") is True:
                counts["checks_hold"] += 1
            elif c.get("holds") is False:
                counts["checks_failed"] += 1
        elif source is None or c["source"] == source:
            counts["claims_" + c["verdict"].replace(" ", "_")] += 1
    return counts


def log_verdicts(run: Any, doc: Mapping[str, Any]) -> dict[str, int]:
    """Record a study's verdicts in MLflow: tag ``verdict/<id>`` per entry on ``run``; metrics
    ``verdicts/<key>`` (:func:`verdict_counts`) on ``run`` and on the study's parent run of this invocation."""
    counts = verdict_counts(doc)
    run.set_tags({f"verdict/{c['id']}": c["verdict"] for c in doc["claims"]})
    metrics = {f"verdicts/{k}": v for k, v in counts.items()}
    run.log_metrics(metrics)
    log_parent = getattr(run, "log_parent_metrics", None)
    if callable(log_parent):
        log_parent(metrics)
    return counts


def write_claims(path: str | Path, *, study: str, scale: str, data_source: str, claims: Sequence[Claim],
                 config_hash: str = "", paper: Mapping[str, str] | None = None,
                 seeds: Sequence[int] = ()) -> dict[str, Any]:
    """Validate and atomically write ``claims.json``; return the document. ``paper`` is ``{title, ref}`` (ref: venue, DOI or URL);
    ``seeds`` the evaluation seeds of the run (shown in the claims table)."""
    doc = {"study": study, "scale": scale, "data_source": data_source, "config_hash": config_hash,
           "paper": dict(paper or {}), "seeds": [int(s) for s in seeds],
           "claims": [_clean(asdict(c)) for c in claims]}
    validate_claims(doc)
    write_json(path, doc)
    return doc


def load_claims(path: str | Path) -> dict[str, Any]:
    """Read and validate a ``claims.json``."""
    doc = read_json(path)
    validate_claims(doc, where=str(path))
    return doc


def validate_claims(doc: Mapping[str, Any], where: str = "claims") -> None:
    """Raise ValueError naming the path of the first schema violation."""
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(CLAIMS_SCHEMA).iter_errors(doc))
    if error is not None:
        loc = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise ValueError(f"{where}: {loc}: {error.message}")
    for i, c in enumerate(doc["claims"]):
        rule = evidence_rule(c["kind"], Evidence(**c["evidence"]))
        if rule and c["verdict"] != INCONCLUSIVE:
            raise ValueError(f"{where}: claims.{i} ({c['id']}): verdict {c['verdict']!r} breaks the {rule}")
        expected = None if c["verdict"] == INCONCLUSIVE else c["verdict"] == REPRODUCED
        if c["kind"] == CHECK and c.get("holds") is not expected:
            raise ValueError(f"{where}: claims.{i} ({c['id']}): check holds={c.get('holds')!r} disagrees with "
                             f"verdict {c['verdict']!r}")


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def collect_seed_records(docs: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, Any]]:
    """Train outputs of a study ({"arm": str, "records": {seed: record}} documents, one per arm × seed chunk) →
    {arm: {seed: record}}; a seed that two outputs of one arm both hold raises ``ValueError``."""
    out: dict[str, dict[int, Any]] = {}
    for doc in docs:
        by_seed = out.setdefault(doc["arm"], {})
        for seed, rec in doc["records"].items():
            if int(seed) in by_seed:
                raise ValueError(f"evaluate: arm {doc['arm']} seed {seed} appears in two train outputs")
            by_seed[int(seed)] = rec
    return out


def common_seeds(records: Mapping[str, Mapping[int, Any]], arms: Sequence[str]) -> list[int]:
    """Seeds present for every arm of ``arms`` in ``{arm: {seed: ...}}`` (empty if an arm is missing): the
    paired units of a comparison between arms."""
    if not all(a in records for a in arms):
        return []
    return sorted(set.intersection(*(set(records[a]) for a in arms)))
