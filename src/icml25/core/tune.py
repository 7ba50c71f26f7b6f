"""``icml25 tune``: run one study on tuning seeds and append what was tried to ``tuning/<slug>.jsonl``.

Tuning is part of the record. Every configuration tried while choosing a study's settings is one JSON line in
``tuning/<slug>.jsonl`` of the repository (keys changed, values, seeds, the claims' per-arm metrics, key numbers
and verdicts, git sha), so a reader can see what was tried before the evaluation seeds were run. The command refuses
the study's evaluation seeds (the ``seeds`` of every scale in ``config/studies/<slug>.yaml``): tuning on them would
make the verdicts fit their own noise.

A tuning run is the study's own pipeline, the same code as ``snakemake --config studies=[<slug>]``, run in a
temporary directory (its own results and MLflow store, thrown away unless ``--keep``) with the given seeds and
``--set`` overrides, so what is tuned is exactly what is evaluated.

    icml25 tune sard --seeds 100 101 102 --set arm_config.sard.penalty_weight=0.1 --note "w sweep"
    icml25 tune ntk_dfl --scale smoke --seeds 200 --dry-run
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .io import atomic_path

RECORD_DIR = "tuning"
SCALES = ("smoke", "default", "paper")


class TuneError(ValueError):
    """A tuning request that cannot be run as given (evaluation seeds, an unknown study, a malformed --set)."""


def repo_root(start: Path | None = None) -> Path:
    """The checkout holding ``Snakefile`` and ``config/``: searched upward from ``start`` (default: the working
    directory), then beside the installed package (an editable install)."""
    candidates = [Path(start or Path.cwd()).resolve(), *Path(start or Path.cwd()).resolve().parents,
                  Path(__file__).resolve().parents[3]]
    for c in candidates:
        if (c / "Snakefile").is_file() and (c / "config" / "studies").is_dir():
            return c
    raise TuneError("icml25 tune: no checkout found (a directory with Snakefile and config/studies/); run it from "
                    "the repository")


def evaluation_seeds(study_yaml: Mapping[str, Any]) -> dict[str, list[int]]:
    """``{scale: seeds}`` of a study yaml: the common ``seeds`` overridden per scale by ``scales.<s>.seeds``."""
    common = list(study_yaml.get("seeds") or [])
    scales = study_yaml.get("scales") or {}
    return {s: [int(x) for x in ((scales.get(s) or {}).get("seeds") or common)] for s in SCALES}


def refuse_evaluation_seeds(slug: str, seeds: Sequence[int], eval_seeds: Mapping[str, Sequence[int]]) -> None:
    """Raise :class:`TuneError` naming every requested seed that is an evaluation seed of some scale."""
    clash = {s: sorted(set(seeds) & set(v)) for s, v in eval_seeds.items() if set(seeds) & set(v)}
    if clash:
        where = "; ".join(f"{scale}: {v}" for scale, v in clash.items())
        raise TuneError(f"icml25 tune {slug}: seeds {sorted(set().union(*clash.values()))} are evaluation seeds of "
                        f"{slug} ({where} in config/studies/{slug}.yaml); tune on other seeds")


def parse_sets(assignments: Sequence[str]) -> dict[str, Any]:
    """``["a.b=1", "c=[1, 2]"]`` → ``{"a": {"b": 1}, "c": [1, 2]}`` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip() or any(not p for p in key.split(".")):
            raise TuneError(f"--set {item!r}: expected key.path=value")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise TuneError(f"--set {item!r}: value is not valid YAML ({exc})") from None
        node = out
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise TuneError(f"--set {item!r}: {p} is set both as a value and as a section")
        node[parts[-1]] = value
    return out


def flat_sets(assignments: Sequence[str]) -> dict[str, Any]:
    """The ``--set`` assignments as ``{dotted key: value}`` (the record's ``set`` field)."""
    return {a.partition("=")[0].strip(): yaml.safe_load(a.partition("=")[2]) for a in assignments}


def record_from_claims(doc: Mapping[str, Any], *, seeds: Sequence[int], sets: Mapping[str, Any], scale: str,
                       git_sha: str, note: str = "", wall_s: float | None = None) -> dict[str, Any]:
    """One tuning record from a study's ``claims.json`` document: per entry its verdict, key numbers and per-arm
    metric means."""
    metrics, key_numbers, verdicts = {}, {}, {}
    for c in doc["claims"]:
        verdicts[c["id"]] = "untested" if c.get("status") == "untested" else c["verdict"]
        if c.get("key_numbers"):
            key_numbers[c["id"]] = c["key_numbers"]
        means = {arm: m.get("mean") for arm, m in (c.get("metrics") or {}).items() if isinstance(m, Mapping)}
        if means:
            metrics[c["id"]] = means
    return {"time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "git_sha": git_sha,
            "study": doc["study"], "scale": scale, "seeds": [int(s) for s in seeds], "set": dict(sets),
            "metrics": metrics, "key_numbers": key_numbers, "verdicts": verdicts, "note": note,
            **({"wall_s": round(wall_s, 1)} if wall_s is not None else {})}


def append_record(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line to ``path`` atomically (the file is rewritten through a temp file and renamed, so a
    killed run never leaves a half line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    with atomic_path(path) as tmp:
        Path(tmp).write_text(old + json.dumps(record, sort_keys=True, default=str) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of one ``tuning/<slug>.jsonl`` (a malformed line raises naming the file and line)."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{i}: not a JSON line ({exc})") from None
    return out


def git_sha(root: Path) -> str:
    """``HEAD`` of the checkout, with ``-dirty`` when tracked files differ; ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_pipeline(root: Path, workdir: Path, slug: str, scale: str, seeds: Sequence[int],
                 overrides: Mapping[str, Any], cores: int) -> Path:
    """Run the study's pipeline in ``workdir`` (links to the checkout's Snakefile, config, workflow and src; its
    own ``results/``); return the path of its ``claims.json``."""
    for name in ("Snakefile", "config", "workflow", "src", "envs"):
        if (root / name).exists() and not (workdir / name).exists():
            (workdir / name).symlink_to(root / name)
    base = yaml.safe_load((root / "config" / "config.yaml").read_text())
    base.update({"studies": [slug], "scale": scale,
                 "overrides": {slug: {**dict(overrides), "seeds": [int(s) for s in seeds]}}})
    cfg = workdir / "tune_config.yaml"
    cfg.write_text(yaml.safe_dump(base, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile", str(cfg), "--quiet",
           "progress"]
    print(f"icml25 tune: running {slug} at {scale} on seeds {list(seeds)} in {workdir}", file=sys.stderr)
    proc = subprocess.run(cmd, cwd=workdir)
    if proc.returncode != 0:
        raise TuneError(f"icml25 tune {slug}: the pipeline failed (exit {proc.returncode}); rerun with --keep DIR "
                        f"to keep its logs (results/{scale}/{slug}/logs under DIR)")
    return workdir / "results" / scale / slug / "claims.json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icml25 tune", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("slug", help="the study")
    parser.add_argument("--scale", default="default", choices=SCALES, help="settings scale (default: default)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True,
                        help="tuning seeds; none may be an evaluation seed of the study")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a study key (dotted path, YAML value); repeatable")
    parser.add_argument("--note", default="", help="why this run (kept in the record)")
    parser.add_argument("--cores", type=int, default=max(1, min(2, os.cpu_count() or 1)), help="snakemake cores")
    parser.add_argument("--record", default=None, help="record file (default: tuning/<slug>.jsonl of the checkout)")
    parser.add_argument("--keep", default=None, metavar="DIR", help="run in DIR and keep it (default: a temp dir)")
    parser.add_argument("--dry-run", action="store_true", help="check the request and print the plan; run nothing")
    args = parser.parse_args(argv)
    try:
        return _tune(args)
    except TuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _tune(args: argparse.Namespace) -> int:
    from icml25.studies import STUDIES

    if args.slug not in STUDIES:
        raise TuneError(f"icml25 tune: unknown study {args.slug!r} (studies: {', '.join(STUDIES)})")
    root = repo_root()
    study_yaml = yaml.safe_load((root / "config" / "studies" / f"{args.slug}.yaml").read_text())
    refuse_evaluation_seeds(args.slug, args.seeds, evaluation_seeds(study_yaml))
    overrides = parse_sets(args.sets)
    _validate_overrides(root, args.slug, args.scale, args.seeds, overrides)
    record_path = Path(args.record) if args.record else root / RECORD_DIR / f"{args.slug}.jsonl"
    if args.dry_run:
        print(json.dumps({"study": args.slug, "scale": args.scale, "seeds": args.seeds,
                          "set": flat_sets(args.sets), "record": str(record_path)}, indent=2))
        return 0
    t0 = time.perf_counter()
    if args.keep:
        workdir = Path(args.keep)
        workdir.mkdir(parents=True, exist_ok=True)
        claims_path = run_pipeline(root, workdir, args.slug, args.scale, args.seeds, overrides, args.cores)
        doc = json.loads(claims_path.read_text())
    else:
        with tempfile.TemporaryDirectory(prefix=f"icml25-tune-{args.slug}-") as tmp:
            claims_path = run_pipeline(root, Path(tmp), args.slug, args.scale, args.seeds, overrides, args.cores)
            doc = json.loads(claims_path.read_text())
    record = record_from_claims(doc, seeds=args.seeds, sets=flat_sets(args.sets), scale=args.scale,
                                git_sha=git_sha(root), note=args.note, wall_s=time.perf_counter() - t0)
    append_record(record_path, record)
    print(json.dumps({"verdicts": record["verdicts"], "key_numbers": record["key_numbers"]}, indent=2,
                     default=str))
    print(f"icml25 tune: appended to {record_path}", file=sys.stderr)
    return 0


def _validate_overrides(root: Path, slug: str, scale: str, seeds: Sequence[int], overrides: Mapping) -> None:
    """Build the study's config with the overrides (the same validation as the Snakefile): an unknown key or a bad
    value fails here, naming the key, before anything runs."""
    from icml25.studies import study_config_class

    from .config import ConfigError
    from .workflow import resolve_study

    try:
        resolve_study(slug, study_config_class(slug),
                      {"scale": scale, "overrides": {slug: {**dict(overrides), "seeds": list(seeds)}}}, root)
    except (ConfigError, ValueError) as exc:
        raise TuneError(f"icml25 tune {slug}: {exc}") from None
