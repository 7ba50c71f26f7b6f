"""Claims: the ``claims.json`` format every study's evaluate stage writes, and the statistics behind verdicts.

Each entry is one of two kinds:

* a **claim** (``kind="claim"``): something a paper states (``source="paper"``) or our illustration of it
  (``source="ours"``), decided from measured outcomes on held-out data;
* a **check** (``kind="check"``): an identity, invariant or mechanism that must hold by mathematics or by
  construction. A failing check is a bug, never a finding; a check's verdict is ``reproduced`` when it holds and
  ``not reproduced`` when it fails, with ``holds`` beside it (``None`` if it could not be computed).

An entry records the statement (and a short ``title`` for tables), which data the verdict rests on, the metric
per arm (mean and a 95% interval over independent units), the test and threshold in words, the computed
statistic, the few ``key_numbers`` that decide it, its :class:`Evidence` and the verdict. Verdicts come only from
:func:`verdict` applied to computed booleans, then two rules applied in one place for every study:

* **adequacy gates** (:class:`Gate`): a claim whose testbed can fail to exhibit the effect carries gates computed
  from the same run (a baseline above chance, headroom above the threshold, the mechanism engaging at all); a
  failed gate makes the verdict ``inconclusive`` and the note names the gate and its numbers;
* the **evidence rule** of :func:`apply_evidence_rules`: a claim is ``reproduced`` or ``not reproduced`` only with
  at least :data:`MIN_UNITS` independent units (training seeds, simulated datasets, images, series: what is
  independently replicated), else ``inconclusive``.

Every claim records its unit, its ``n`` of top-level units, how its interval was computed (``ci_method``) and the
minimum detectable effect at that n (:func:`mde`), so an ``inconclusive`` says how much evidence would decide it.
Intervals come from :func:`summarize` (Student t over per-unit values), :func:`hierarchical_bootstrap` (data nested
in seeds or images), :func:`block_bootstrap` (time series) or the exact tests :func:`sign_flip_test` /
:func:`sign_test`; a percentile bootstrap of a handful of values is never reported as a 95% interval.

**Tiers.** A claim whose source is the paper records ``paper_data``: True when it was decided on the paper's own
data, False on a stand-in (a generator, a miniature, another dataset). Tables show the two tiers apart with their
own counts, and a stand-in verdict never enters the paper-data headline. A statement that the scale cannot test at
all is ``untested`` (:func:`untested`, with the scale that would test it): shown apart, never counted as a claim.

Checks are not gated: they hold or fail at any scale. :func:`validate_claims` rejects documents that break these
rules (a paper claim without a boolean ``paper_data``, a claim without ``ci_method``, a claim with nothing measured
— a verdict fixed in code —, a verdict that disagrees with its gates or with the evidence rule).
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .io import read_json, write_json

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
#: ``status`` of a claim-kind entry: ``tested`` (its verdict was computed) or ``untested`` (a statement the run's
#: scale cannot test: verdict ``inconclusive``, shown apart, never counted among claims; ``testable_at`` names the
#: scale that would test it)
TESTED, UNTESTED = "tested", "untested"
STATUSES = (TESTED, UNTESTED)
SCALES = ("smoke", "default", "paper")
CLAIM, CHECK = "claim", "check"
KINDS = (CLAIM, CHECK)
MIN_UNITS = 3  # evidence rule: independent units (seeds, functions, windows, runs) a claim verdict needs
COUNT_KEYS = ("claims_reproduced", "claims_not_reproduced", "claims_inconclusive", "checks_hold", "checks_failed",
              "untested")
TIERS = ("paper_data", "stand_in")  # claim tiers: decided on the paper's own data, or on a stand-in

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
        "rehearsal": {"type": "boolean"},
        "deterministic": {"type": "boolean"},  # false: CUDA runs with a non-deterministic op (core.device)
        "models": {"type": "object", "additionalProperties": {  # hub models used, at which commit (core.hub)
            "type": "object", "required": ["repo_id", "revision", "source"],
            "properties": {"repo_id": {"type": "string"}, "revision": {"type": "string", "minLength": 1},
                           "source": {"enum": ["pinned", "resolved", "local"]}}}},
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
                    "status": {"enum": list(STATUSES)},
                    "ci_method": {"type": "string"},
                    "holds": {"type": ["boolean", "null"]},
                    "key_numbers": {"type": "object"},
                    "evidence": {
                        "type": "object", "required": ["n", "unit", "paper_data", "ci_method"],
                        "properties": {"n": {"type": "integer", "minimum": 0}, "unit": {"type": "string"},
                                       "paper_data": {"type": ["boolean", "null"]},
                                       "ci_method": {"type": "string"},
                                       "mde": {"type": ["number", "null"]}}},
                    "gates": {"type": "array", "items": {
                        "type": "object", "required": ["name", "passed", "value", "threshold"],
                        "properties": {"name": {"type": "string", "minLength": 1}, "passed": {"type": "boolean"},
                                       "value": {}, "threshold": {"type": "string"},
                                       "text": {"type": "string"}}}},
                    "testable_at": {"enum": ["", *SCALES]},
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
                 seed: int = 0, statistic=np.mean, min_n: int = 20) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over a 1-D sample of independent units.

    Refused (ValueError) for fewer than ``min_n`` values: the percentile bootstrap of a handful of values is close
    to their [min, max] and is no 95% interval (use :func:`summarize`, the Student-t interval). Deterministic for a
    given ``seed``; NaNs raise.
    """
    x = _finite_sample(values, "bootstrap_ci")
    if x.size < min_n:
        raise ValueError(f"bootstrap_ci: {x.size} values < {min_n}: a percentile bootstrap of so few units is not a "
                         f"{level:.0%} interval; use summarize() (Student t) on per-unit values")
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    stats = statistic(x[idx], axis=1)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


def _finite_sample(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        raise ValueError(f"{name}: empty sample")
    if np.isnan(x).any():
        raise ValueError(f"{name}: sample contains NaN")
    return x


def t_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean of ``n`` independent per-unit values: mean ± t_{(1+level)/2, n-1}·s/√n.

    For ``[0.1, 0.2, 0.3]`` at 95%: 0.2 ± 4.303·0.1/√3 = [−0.048, 0.448]. ``n = 1`` gives the point (no interval);
    a constant sample gives a zero-width interval.
    """
    from scipy import stats

    x = _finite_sample(values, "t_interval")
    m = float(x.mean())
    if x.size < 2:
        return m, m
    half = float(stats.t.ppf(0.5 + level / 2.0, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m - half, m + half


def summarize(values: Sequence[float] | np.ndarray, *, method: Literal["t", "bootstrap"] = "t",
              level: float = 0.95, unit: str = "seeds", **kwargs: Any) -> dict[str, Any]:
    """``{mean, ci_low, ci_high, std, n, ci_method}`` of one value per independent unit (seed, dataset, image).

    ``method="t"`` (default): the Student-t interval (:func:`t_interval`), right for few units. ``"bootstrap"``:
    the percentile bootstrap (:func:`bootstrap_ci`, ``kwargs`` passed on), refused below 20 units.
    ``ci_method`` says which, at what level and over how many units (``"t 95%, n=3 seeds"``).
    """
    x = _finite_sample(values, "summarize")
    if method == "t":
        low, high = t_interval(x, level)
        how = f"t {level:.0%}, n={x.size} {unit}" if x.size > 1 else f"none (n=1 {unit})"
    elif method == "bootstrap":
        low, high = bootstrap_ci(x, level=level, **kwargs)
        how = f"percentile bootstrap {level:.0%}, n={x.size} {unit}"
    else:
        raise ValueError(f"summarize: method must be 't' or 'bootstrap', got {method!r}")
    return {"mean": float(x.mean()), "ci_low": low, "ci_high": high,
            "std": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n": int(x.size), "ci_method": how}


def mde(n: int, sd: float, *, level: float = 0.95, power: float = 0.8) -> float:
    """Minimum detectable effect of a two-sided one-sample (or paired) t-test at ``n`` units with per-unit
    standard deviation ``sd``: ``(t_{1-α/2, n-1} + t_{power, n-1}) · sd / √n`` (same units as ``sd``; NaN for
    n < 2 or a non-finite sd). An effect smaller than this is unlikely to be decided at this n."""
    from scipy import stats

    if n < 2 or not math.isfinite(sd):
        return float("nan")
    df = n - 1
    return float((stats.t.ppf(0.5 + level / 2.0, df) + stats.t.ppf(power, df)) * abs(sd) / math.sqrt(n))


def sign_flip_test(diffs: Sequence[float] | np.ndarray, *,
                   alternative: Literal["two-sided", "greater", "less"] = "two-sided",
                   n_resamples: int = 20000, seed: int = 0) -> float:
    """p-value of the paired permutation (sign-flip) test of mean(diffs) = 0 on per-unit effects.

    Exact (all 2^n sign patterns) for n ≤ 16, else Monte Carlo with ``n_resamples`` draws (the observed pattern
    counted, so p > 0). With n units the smallest attainable one-sided p is 2^-n (n = 3: 0.125).
    """
    d = _finite_sample(diffs, "sign_flip_test")
    n = d.size
    if n <= 16:
        signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1)
        stats_ = (signs * d).mean(axis=1)
        extra = 0
    else:
        rng = np.random.Generator(np.random.PCG64(seed))
        stats_ = (rng.choice([-1.0, 1.0], size=(n_resamples, n)) * d).mean(axis=1)
        extra = 1
    obs = d.mean()
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if alternative == "greater":
        hits = np.sum(stats_ >= obs - tol)
    elif alternative == "less":
        hits = np.sum(stats_ <= obs + tol)
    elif alternative == "two-sided":
        hits = np.sum(np.abs(stats_) >= abs(obs) - tol)
    else:
        raise ValueError(f"sign_flip_test: unknown alternative {alternative!r}")
    return float((hits + extra) / (stats_.size + extra))


def sign_test(diffs: Sequence[float] | np.ndarray, *,
              alternative: Literal["two-sided", "greater", "less"] = "two-sided") -> float:
    """Exact binomial sign test of median(diffs) = 0 (zeros dropped); p = 1 when every diff is zero."""
    from scipy import stats

    d = _finite_sample(diffs, "sign_test")
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    return float(stats.binomtest(int((d > 0).sum()), int(d.size), 0.5, alternative=alternative).pvalue)


def hierarchical_bootstrap(groups: Sequence[Sequence[float] | np.ndarray], *, statistic=np.mean,
                           n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
                           min_units: int = 5) -> tuple[float, float]:
    """Percentile interval of ``statistic`` for data nested in top-level units (seeds, images, series).

    ``groups``: one 1-D array per top-level unit (the points, crops or clusters inside it). Each resample draws the
    top-level units with replacement, then the points within each drawn unit with replacement, and applies
    ``statistic`` to the pooled points. Refused below ``min_units`` top-level units (summarize the per-unit means
    with :func:`summarize` instead).
    """
    arrays = [_finite_sample(g, "hierarchical_bootstrap") for g in groups]
    k = len(arrays)
    if k < min_units:
        raise ValueError(f"hierarchical_bootstrap: {k} top-level units < {min_units}; summarize the per-unit means "
                         "with summarize() (Student t)")
    rng = np.random.Generator(np.random.PCG64(seed))
    out = np.empty(n_resamples)
    for b in range(n_resamples):
        top = rng.integers(0, k, size=k)
        pooled = np.concatenate([arrays[i][rng.integers(0, arrays[i].size, size=arrays[i].size)] for i in top])
        out[b] = statistic(pooled)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(out, alpha)), float(np.quantile(out, 1.0 - alpha))


def block_bootstrap(series: Sequence[float] | np.ndarray, *, block: int, statistic=np.mean,
                    n_resamples: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Moving-block bootstrap interval of ``statistic`` over a time-ordered series of per-window values.

    Resamples ⌈n/block⌉ blocks of ``block`` consecutive values (start uniform over the n − block + 1 positions),
    concatenated and cut to n, so values that share targets (overlapping windows) stay together. ``block`` should
    cover the dependence (e.g. the forecast horizon for stride-1 windows). Needs at least 5 blocks' worth of data.
    """
    x = _finite_sample(series, "block_bootstrap")
    n = x.size
    if block < 1:
        raise ValueError(f"block_bootstrap: block must be >= 1, got {block}")
    if n < 5 * block:
        raise ValueError(f"block_bootstrap: {n} values < 5 blocks of {block}: too few independent blocks")
    rng = np.random.Generator(np.random.PCG64(seed))
    n_blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(n_resamples, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(n_resamples, -1)[:, :n]
    stats_ = np.array([statistic(x[row]) for row in idx])
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(stats_, alpha)), float(np.quantile(stats_, 1.0 - alpha))


def paired_differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    """``a - b`` for per-seed paired samples; lengths must match (same seeds in the same order)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_differences: unequal lengths {a.size} and {b.size}")
    return a - b


@dataclass(frozen=True)
class Evidence:
    """What a verdict rests on.

    ``n``: the number of top-level independent units (training seeds, simulated datasets, images, series: what is
    independently replicated, never test points pooled across them); ``unit``: their name. ``paper_data``: True
    when decided on the paper's own data, False on a stand-in (a generator, a miniature, another dataset); None only
    for entries not about the paper (``source="ours"``, checks). ``ci_method``: how the interval of the deciding
    statistic was computed (e.g. ``summarize(...)["ci_method"]``); required on every claim. ``mde``: the minimum
    detectable effect at this n (:func:`mde`), in the units of the deciding statistic; None where not meaningful.
    """

    n: int
    unit: str = "seeds"
    paper_data: bool | None = None
    ci_method: str = ""
    mde: float | None = None


@dataclass(frozen=True)
class Gate:
    """An adequacy gate: a condition on the same run under which the testbed can show the claimed effect at all
    (a baseline above chance by a margin, headroom larger than the threshold, the mechanism engaging). ``value``
    is the measured number, ``threshold`` the condition in words (``">= 0.2"``), ``text`` what it guards."""

    name: str
    passed: bool
    value: Any
    threshold: str
    text: str = ""

    def describe(self) -> str:
        return f"adequacy gate {self.name}: {_fmt_num(self.value)} (needs {self.threshold})" + (
            f" — {self.text}" if self.text else "")


def _fmt_num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def gate(name: str, value: Any, *, at_least: float | None = None, at_most: float | None = None,
         text: str = "") -> Gate:
    """A :class:`Gate` that passes iff ``value >= at_least`` and/or ``value <= at_most`` (a NaN or None value
    fails). At least one bound is required."""
    if at_least is None and at_most is None:
        raise ValueError(f"gate {name}: give at_least and/or at_most")
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    ok = math.isfinite(v) and (at_least is None or v >= at_least) and (at_most is None or v <= at_most)
    parts = ([f">= {at_least:g}"] if at_least is not None else []) + ([f"<= {at_most:g}"] if at_most is not None
                                                                      else [])
    return Gate(name=name, passed=bool(ok), value=v if math.isfinite(v) else None, threshold=" and ".join(parts),
                text=text)


def evidence_rule(kind: str, evidence: Evidence) -> str:
    """The evidence rule a claim breaks, in words ("" if none). Checks are never gated."""
    if kind == CHECK:
        return ""
    if evidence.n < MIN_UNITS:
        return (f"evidence rule: {evidence.n} independent {evidence.unit} < {MIN_UNITS} needed for a "
                "claim verdict")
    return ""


def apply_evidence_rules(kind: str, computed: str, evidence: Evidence) -> tuple[str, str]:
    """``(verdict, note)``: ``computed`` unless a claim breaks an evidence rule, then ``inconclusive`` with a note
    naming the rule and what the test alone gave."""
    rule = evidence_rule(kind, evidence)
    if rule and computed != INCONCLUSIVE:
        return INCONCLUSIVE, f"{rule} (the test alone gives {computed!r})"
    return computed, ""


def apply_gates(kind: str, computed: str, gates: Sequence[Gate]) -> tuple[str, str]:
    """``(verdict, note)``: a claim with a failed adequacy gate is ``inconclusive``; the note names every failed
    gate with its value and threshold, and what the test alone gave."""
    failed = [g for g in gates if not g.passed]
    if kind == CHECK or not failed:
        return computed, ""
    text = "; ".join(g.describe() for g in failed)
    if computed != INCONCLUSIVE:
        return INCONCLUSIVE, f"{text} (the test alone gives {computed!r})"
    return computed, text


def tier(entry: Mapping[str, Any]) -> str:
    """``"paper_data"`` for a claim decided on the paper's own data, else ``"stand_in"``."""
    return "paper_data" if (entry.get("evidence") or {}).get("paper_data") is True else "stand_in"


@dataclass
class Claim:
    """One entry's computed outcome (a claim, a check, or an untested statement); see :data:`CLAIMS_SCHEMA` and the
    module docstring.

    ``verdict`` is the test's outcome; for ``kind="claim"`` the adequacy gates and the evidence rule are applied on
    construction (the verdict becomes ``inconclusive`` and the note says why), and ``holds`` is set for checks.
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
    gates: list[Gate] = field(default_factory=list)
    testable_at: str = ""
    status: str = TESTED
    ci_method: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.evidence, Evidence):
            self.evidence = Evidence(**self.evidence)
        self.gates = [g if isinstance(g, Gate) else Gate(**g) for g in self.gates]
        self.ci_method = self.ci_method or self.evidence.ci_method  # top-level copy, what tables and tools read
        if self.status not in STATUSES:
            raise ValueError(f"claim {self.id}: status must be one of {STATUSES}, got {self.status!r}")
        if self.status == UNTESTED:
            if self.kind != CLAIM or self.testable_at not in SCALES or self.verdict != INCONCLUSIVE:
                raise ValueError(f"claim {self.id}: untested needs kind='claim', verdict inconclusive and "
                                 f"testable_at in {SCALES} (use icml25.core.claims.untested)")
            return
        if self.kind == CHECK:
            self.holds = None if self.verdict == INCONCLUSIVE else self.verdict == REPRODUCED
            return
        self.holds = None
        notes = []
        computed = self.verdict  # both rules judge the test's own outcome, and each names itself in the note
        by_gates, gate_note = apply_gates(self.kind, computed, self.gates)
        by_rule, rule_note = apply_evidence_rules(self.kind, computed, self.evidence)
        self.verdict = by_gates if by_gates == by_rule else INCONCLUSIVE
        notes = [n for n in (gate_note, rule_note) if n]
        if notes:
            own = self.note.strip().rstrip(".;")  # "own note; evidence rule: ..." reads as two clauses
            self.note = "; ".join(([own] if own else []) + notes) + "."


def check(id: str, statement: str, *, holds: bool | None, data: str, test: str, threshold: str,
          evidence: Evidence, **kwargs: Any) -> Claim:
    """A check entry (identity, invariant, mechanism): verdict from ``holds`` (None: could not be computed)."""
    v = INCONCLUSIVE if holds is None else verdict(bool(holds), not holds)
    return Claim(id=id, statement=statement, source=kwargs.pop("source", "ours"), data=data, test=test,
                 threshold=threshold, verdict=v, kind=CHECK, evidence=evidence, **kwargs)


def untested(id: str, statement: str, *, scale: str, reason: str, source: Literal["paper", "ours"] = "paper",
             data: str = "", title: str = "", paper_data: bool | None = None, unit: str = "seeds") -> Claim:
    """A statement this run's scale cannot test (``scale``: the scale that would, e.g. ``"paper"``; ``reason``:
    why, e.g. "needs ImageNet-1k and a T5 learner"). Never counted among claims; shown apart in the tables."""
    if scale not in SCALES:
        raise ValueError(f"untested {id}: scale must be one of {SCALES}, got {scale!r}")
    return Claim(id=id, statement=statement, source=source, data=data or "not run at this scale",
                 test="not run at this scale", threshold="", verdict=INCONCLUSIVE, note=reason, title=title,
                 evidence=Evidence(0, unit, paper_data, ""), testable_at=scale, status=UNTESTED)


def verdict_counts(doc: Mapping[str, Any], source: str | None = None, tier: str | None = None) -> dict[str, int]:
    """``{claims_reproduced, claims_not_reproduced, claims_inconclusive, checks_hold, checks_failed, untested}`` of
    one claims document (or of ``{"claims": [...entries of several documents...]}``). ``source`` ("paper" or
    "ours") and ``tier`` ("paper_data" or "stand_in", see :func:`tier`) restrict the claim and untested counts;
    checks are counted regardless. A check that could not be computed (``holds`` null) counts in neither check
    key. Untested entries are never counted among claims."""
    if tier is not None and tier not in TIERS:
        raise ValueError(f"verdict_counts: tier must be one of {TIERS}, got {tier!r}")
    counts = dict.fromkeys(COUNT_KEYS, 0)
    for c in doc["claims"]:
        if c.get("kind", CLAIM) == CHECK:
            if c.get("holds") is True:
                counts["checks_hold"] += 1
            elif c.get("holds") is False:
                counts["checks_failed"] += 1
            continue
        if (source is not None and c["source"] != source) or (tier is not None and _tier_of(c) != tier):
            continue
        if c.get("status") == UNTESTED:
            counts["untested"] += 1
        else:
            counts["claims_" + c["verdict"].replace(" ", "_")] += 1
    return counts


def _tier_of(entry: Mapping[str, Any]) -> str:
    return tier(entry)


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
                 seeds: Sequence[int] = (), models: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Validate and atomically write ``claims.json``; return the document. ``paper`` is ``{title, ref}`` (ref: venue, DOI or URL);
    ``seeds`` the evaluation seeds of the run (shown in the claims table); ``models`` the hub models the run loaded
    and their commits (:func:`icml25.core.hub.record`), written as the ``models`` block."""
    from .device import deterministic

    # deterministic: false when the study's runs used an op without a deterministic CUDA kernel (core.device):
    # its intervals must then include the run-to-run spread (device.widen_interval)
    doc = {"study": study, "scale": scale, "data_source": data_source, "config_hash": config_hash,
           "paper": dict(paper or {}), "seeds": [int(s) for s in seeds], "deterministic": deterministic(),
           "claims": [_clean(asdict(c)) for c in claims]}
    if models:
        from .hub import as_claims_block

        doc["models"] = as_claims_block(models)
    from .rehearsal import ENV as REHEARSAL_ENV

    if os.environ.get(REHEARSAL_ENV):
        doc = mark_rehearsal(doc)
    validate_claims(doc)
    write_json(path, doc)
    return doc


REHEARSAL_NOTE = "rehearsal: decided on miniature stand-ins of the paper's files, not on the paper's data"


def mark_rehearsal(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A claims document of a paper-scale rehearsal (``icml25.core.rehearsal``): the paper code ran on miniature
    files in the real formats, so nothing in it was decided on the paper's data, whatever the study's code believes
    (it read the files through the real manifest's rows): ``rehearsal: true`` at the top, every ``paper_data``
    True becomes False, and the claim's note and data say why."""
    out = {**doc, "rehearsal": True, "claims": []}
    for c in doc["claims"]:
        c = {**c, "evidence": dict(c["evidence"])}
        if c["evidence"].get("paper_data") is True:
            c["evidence"]["paper_data"] = False
        c["data"] = f"[rehearsal miniature] {c.get('data', '')}".strip()
        c["note"] = "; ".join(x for x in (REHEARSAL_NOTE, c.get("note", "")) if x)
        out["claims"].append(c)
    return out


def load_claims(path: str | Path) -> dict[str, Any]:
    """Read and validate a ``claims.json``."""
    doc = read_json(path)
    validate_claims(doc, where=str(path))
    return doc


def validate_claims(doc: Mapping[str, Any], where: str = "claims") -> None:
    """Raise ValueError naming the path of the first violation of the schema or of the rules: a paper claim
    without a boolean ``paper_data``; a claim without ``ci_method``; a claim with nothing measured (a verdict fixed
    in code: use :func:`untested`); a verdict that a failed gate or the evidence rule forbids; a check whose
    ``holds`` disagrees with its verdict."""
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(CLAIMS_SCHEMA).iter_errors(doc))
    if error is not None:
        loc = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise ValueError(f"{where}: {loc}: {error.message}")
    for i, c in enumerate(doc["claims"]):
        at = f"{where}: claims.{i} ({c['id']})"
        ev = c["evidence"]
        if c.get("status") == UNTESTED:
            if c["kind"] != CLAIM or c.get("testable_at", "") not in SCALES or c["verdict"] != INCONCLUSIVE:
                raise ValueError(f"{at}: an untested entry must be a claim, verdict inconclusive, naming the scale "
                                 "that would test it (testable_at)")
            continue
        if c["kind"] == CLAIM:
            if c["source"] == "paper" and not isinstance(ev.get("paper_data"), bool):
                raise ValueError(f"{at}: a paper claim needs evidence.paper_data true (the paper's data) or false "
                                 f"(a stand-in), got {ev.get('paper_data')!r}")
            if not str(c.get("ci_method") or ev.get("ci_method") or "").strip():
                raise ValueError(f"{at}: a claim needs ci_method (how its interval was computed; "
                                 "Evidence(..., ci_method=...))")
            if not _measured(c):
                raise ValueError(f"{at}: verdict {c['verdict']!r} with nothing measured (no finite metric, "
                                 "statistic or key number) is a verdict fixed in code; use untested(...) for a "
                                 "statement this scale cannot test")
            failed = [g["name"] for g in c.get("gates") or [] if not g["passed"]]
            if failed and c["verdict"] != INCONCLUSIVE:
                raise ValueError(f"{at}: verdict {c['verdict']!r} despite failed adequacy gate(s) {failed}")
        rule = evidence_rule(c["kind"], Evidence(**{k: ev[k] for k in ("n", "unit", "paper_data")}))
        if rule and c["verdict"] != INCONCLUSIVE:
            raise ValueError(f"{at}: verdict {c['verdict']!r} breaks the {rule}")
        expected = None if c["verdict"] == INCONCLUSIVE else c["verdict"] == REPRODUCED
        if c["kind"] == CHECK and c.get("holds") is not expected:
            raise ValueError(f"{at}: check holds={c.get('holds')!r} disagrees with verdict {c['verdict']!r}")


def _measured(entry: Mapping[str, Any]) -> bool:
    """Whether an entry carries any measured number: a finite metric mean, a statistic or a key number."""
    for m in (entry.get("metrics") or {}).values():
        v = m.get("mean") if isinstance(m, Mapping) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return True
    return _has_number(entry.get("statistic")) or _has_number(entry.get("key_numbers"))


def _has_number(obj: Any) -> bool:
    if isinstance(obj, bool):
        return True
    if isinstance(obj, (int, float)):
        return math.isfinite(obj)
    if isinstance(obj, Mapping):
        return any(_has_number(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_number(v) for v in obj)
    return False


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


def format_numbers(value: Any) -> str:
    """A claim's deciding numbers as text: mappings ``k = v; ...``, lists ``[a, b]``, floats to 4 significant
    digits, booleans lower case, None as "" (the claims table and the MLflow experiment description both use it)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k} = {format_numbers(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_numbers(v) for v in value) + "]"
    return "" if value is None else str(value)


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
