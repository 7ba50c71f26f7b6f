"""MLflow as its users know it: what the project records in MLflow's own terms, so the UI's columns, filters and
pages show it (issue 40). Pure helpers used by :mod:`icml25.core.tracking`; no ``import mlflow`` (stage jobs log
over the stdlib REST client).

* **Source** (:func:`source_tags`): ``mlflow.source.name`` ``icml25/studies/<slug>:<stage>@<commit7>`` (the
  study package, the stage and the commit; the runs table's Source column shows the part after the last ``/``:
  ``<slug>:<stage>@<commit7>``), ``mlflow.source.type`` ``LOCAL``,
  ``mlflow.source.git.commit`` (the clean sha; the existing ``git_sha`` tag keeps ``+dirty``), and
  ``mlflow.source.git.branch`` / ``mlflow.source.git.repoURL`` when git knows them.
* **Datasets** (:func:`dataset_input`): a stage input under ``raw/``, ``interim/`` or ``processed/`` of the study's
  results is a dataset input of the job's run: name (the manifest row's name for a downloaded file whose sha256 is
  pinned in the study's ``manifest.csv``, else ``<slug>/<dir>/<file>``: the dataset and its split), digest (the
  first 16 hex digits of the content sha256 — for a downloaded file, the manifest's sha256; MLflow stores at most
  36 characters), source (the manifest URL, else the local file), schema (``mlflow_colspec``: CSV columns, or one
  entry per array of an ``.npz``/``.npy`` with dtype and shape, or a parquet file's columns) and profile (rows,
  bytes, full sha256, shapes), input tag ``mlflow.data.context`` (``training`` / ``evaluation`` /
  ``preprocessing`` ...). Descriptions are cached per (path, size, mtime) in ``<results>/.tracking/datasets.json``
  so a file is hashed once however many jobs read it.
* **Models**: the model registry ``<results>/.tracking/models.json`` maps a logged model's file to its LoggedModel
  (id, arm, seeds, the datasets it was trained on), so the evaluate job links the models it reads as inputs.
* **Descriptions** (:func:`experiment_note`, :func:`parent_note`): Markdown for ``mlflow.note.content``.
* **Claims table** (:func:`table_json`): the ``log_table`` artifact format (pandas ``orient="split"``) and the
  ``mlflow.loggedArtifacts`` tag that makes the artifact view render it as a table.

``ICML25_MLFLOW_NATIVE=0`` turns all of this off (the logging is then what it was before issue 40).
"""
from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

ENV_NATIVE = "ICML25_MLFLOW_NATIVE"
NOTE = "mlflow.note.content"
LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"
CONTEXT_TAG = "mlflow.data.context"
SOURCE_NAME, SOURCE_TYPE = "mlflow.source.name", "mlflow.source.type"
GIT_COMMIT, GIT_BRANCH, GIT_REPO = "mlflow.source.git.commit", "mlflow.source.git.branch", "mlflow.source.git.repoURL"
DATA_DIRS = ("raw", "interim", "processed")
MODEL_DIR = "models"
DIGEST_CHARS = 16
CONTEXTS = {"train": "training", "evaluate": "evaluation", "preprocess": "preprocessing"}
EXPERIMENT_NOTE_MAX = 20000  # MLflow's limit on an experiment tag value
RUN_NOTE_MAX = 8000  # ... and on a run tag value
STUDIES_DIR = Path(__file__).resolve().parents[1] / "studies"


def enabled() -> bool:
    """Whether the issue-40 records are written (``ICML25_MLFLOW_NATIVE`` not ``0``)."""
    return os.environ.get(ENV_NATIVE, "1") not in ("0", "false", "no", "off")


# -- source -----------------------------------------------------------------------------------------------------

def _git(*args: str) -> str:
    """``git ARGS`` in the checkout the running code comes from (the package's directory: an editable install's
    repository), not the working directory, which may be a copy of the project outside git."""
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


@lru_cache(maxsize=1)
def git_info() -> dict[str, str]:
    """``{commit, branch, repo_url}`` of the working tree (empty strings outside git); one ``git rev-parse`` and one
    ``git config`` call. A repo URL's credentials are redacted."""
    from .mlflow_rest import redact

    lines = _git("rev-parse", "HEAD", "--abbrev-ref", "HEAD").splitlines()
    commit = lines[0] if lines and re.fullmatch(r"[0-9a-f]{40}", lines[0]) else ""
    branch = lines[1] if len(lines) > 1 and lines[1] != "HEAD" else ""
    repo = redact(_git("config", "--get", "remote.origin.url")) if commit else ""
    return {"commit": commit, "branch": branch, "repo_url": repo}


def source_tags(slug: str, stage: str) -> dict[str, str]:
    """The ``mlflow.source.*`` tags of a run of ``stage`` of study ``slug`` (see the module doc)."""
    info = git_info()
    module = f"icml25/studies/{slug}" if slug != "summary" else "icml25/core/summary"
    name = f"{module}:{stage}" + (f"@{info['commit'][:7]}" if info["commit"] else "")
    tags = {SOURCE_NAME: name, SOURCE_TYPE: "LOCAL", GIT_COMMIT: info["commit"], GIT_BRANCH: info["branch"],
            GIT_REPO: info["repo_url"]}
    return {k: v for k, v in tags.items() if v}


def context(stage: str) -> str:
    """The ``mlflow.data.context`` of a stage's inputs: training, evaluation, preprocessing, else the stage."""
    return CONTEXTS.get(stage, stage)


# -- datasets ---------------------------------------------------------------------------------------------------

def kind_of(path: Path, slug: str | None = None) -> str | None:
    """``"data"`` for a file under a ``raw``/``interim``/``processed`` directory of the study's results (the part
    of the path after ``<slug>/`` when ``slug`` is given), ``"model"`` under ``models``, else None (figures,
    metrics, claims)."""
    rel = Path(_relative(path, slug)) if slug else Path(path)
    parts = set(rel.parts[:-1])
    if parts & set(DATA_DIRS):
        return "data"
    if MODEL_DIR in parts:
        return "model"
    return None


def sha256_of(path: Path) -> str:
    """sha256 of a file, or of a directory (its files' relative paths and sha256s, sorted: as ``log_model``)."""
    path = Path(path)
    if path.is_file():
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    files = sorted(p for p in path.rglob("*") if p.is_file())
    lines = "".join(f"{f.relative_to(path).as_posix()} {sha256_of(f)}\n" for f in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def _open_text(path: Path):
    name = path.name.lower()
    if name.endswith(".bz2"):
        return io.TextIOWrapper(bz2.open(path), encoding="utf-8", errors="replace", newline="")
    if name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path), encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _npy_header(fh) -> tuple[str, list[int]]:
    import numpy as np

    version = np.lib.format.read_magic(fh)
    shape, _, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)(fh)
    return str(dtype), [int(n) for n in shape]


def schema_and_profile(path: Path) -> tuple[dict | None, dict]:
    """``(schema, profile)`` of a data file, from headers only where the format allows (npz/npy: array headers;
    parquet: footer; csv: header line + a line count)."""
    name = path.name.lower()
    profile: dict[str, Any] = {}
    schema = None
    try:
        if path.is_dir():
            files = [p for p in path.rglob("*") if p.is_file()]
            profile["files"] = len(files)
        elif name.endswith(".npz"):
            arrays = {}
            with zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    if member.endswith(".npy"):
                        with zf.open(member) as fh:
                            arrays[member[:-4]] = _npy_header(fh)
            schema = [{"name": k, "type": f"{d}{s}"} for k, (d, s) in arrays.items()]
            profile["shapes"] = {k: s for k, (_, s) in arrays.items()}
            rows = {s[0] for _, s in arrays.values() if s}
            if len(rows) == 1:
                profile["num_rows"] = rows.pop()
        elif name.endswith(".npy"):
            with open(path, "rb") as fh:
                dtype, shape = _npy_header(fh)
            schema = [{"name": path.stem, "type": f"{dtype}{shape}"}]
            profile["shapes"] = {path.stem: shape}
            if shape:
                profile["num_rows"] = shape[0]
        elif name.endswith(".parquet"):
            import pyarrow.parquet as pq

            meta = pq.read_metadata(path)
            arrow = meta.schema.to_arrow_schema()
            schema = [{"name": f.name, "type": str(f.type)} for f in arrow]
            profile["num_rows"] = int(meta.num_rows)
        elif re.search(r"\.(csv|tsv)(\.bz2|\.gz)?$", name):
            with _open_text(path) as fh:
                header = next(csv.reader([fh.readline()], delimiter="\t" if ".tsv" in name else ","), [])
                rows = sum(1 for _ in fh)
            schema = [{"name": c, "type": "string"} for c in header]
            profile["num_rows"] = rows
        elif name.endswith(".json") and path.stat().st_size <= 50 * 2**20:
            doc = json.loads(path.read_text())
            profile["json"] = type(doc).__name__
            if isinstance(doc, Mapping):
                profile["keys"] = len(doc)
            elif isinstance(doc, list):
                profile["num_rows"] = len(doc)
    except Exception as err:  # noqa: BLE001 - a profile is a convenience; an odd file keeps its digest
        profile["profile_error"] = f"{type(err).__name__}: {str(err)[:120]}"
    return ({"mlflow_colspec": schema} if schema else None), profile


def describe(path: Path, cache_file: Path | None = None) -> dict[str, Any]:
    """``{sha256, bytes, schema, profile}`` of a data file or directory, cached in ``cache_file`` by
    (path, size, mtime_ns)."""
    from .io import file_lock

    path = Path(path).resolve()
    st = path.stat()
    size = st.st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    key = f"{path}|{size}|{st.st_mtime_ns}"
    if cache_file is not None and cache_file.exists():
        try:
            hit = json.loads(cache_file.read_text()).get(key)
        except json.JSONDecodeError:
            hit = None
        if hit is not None:
            return hit
    schema, profile = schema_and_profile(path)
    record = {"sha256": sha256_of(path), "bytes": size, "schema": schema, "profile": profile}
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(cache_file.with_suffix(".lock")):
            try:
                data = json.loads(cache_file.read_text()) if cache_file.exists() else {}
            except json.JSONDecodeError:
                data = {}
            data[key] = record
            tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, cache_file)
    return record


@lru_cache(maxsize=64)
def manifest_rows(slug: str) -> dict[str, dict[str, str]]:
    """``{sha256: row}`` of the study's ``manifest*.csv`` rows that pin a sha256 (empty if none)."""
    out: dict[str, dict[str, str]] = {}
    for manifest in sorted((STUDIES_DIR / slug).glob("manifest*.csv")):
        with open(manifest, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                sha = (row.get("sha256") or "").strip().lower()
                if re.fullmatch(r"[0-9a-f]{64}", sha):
                    out[sha] = row
    return out


def _relative(path: Path, slug: str) -> str:
    parts = Path(path).resolve().parts
    if slug in parts:
        i = len(parts) - 1 - parts[::-1].index(slug)
        return "/".join(parts[i + 1:])
    return Path(path).name


def dataset_input(path: Path, slug: str, stage: str, results_dir: Path) -> tuple[dict, dict]:
    """``(dataset, input tags)`` of one data file read by a stage job (see the module doc)."""
    rec = describe(path, Path(results_dir).resolve() / ".tracking" / "datasets.json")
    row = manifest_rows(slug).get(rec["sha256"])
    if row is not None:
        name = row.get("name") or Path(path).name
        source_type, source = "http", {"url": row.get("url", ""), "manifest": f"src/icml25/studies/{slug}/manifest.csv"}
    else:
        name = f"{slug}/{_relative(path, slug)}"
        source_type, source = "local", {"uri": Path(path).resolve().as_uri()}
    profile = {**rec["profile"], "bytes": rec["bytes"], "sha256": rec["sha256"]}
    dataset = {"name": name[:500], "digest": rec["sha256"][:DIGEST_CHARS], "source_type": source_type,
               "source": json.dumps(source), "profile": json.dumps(profile)}
    if rec["schema"]:
        dataset["schema"] = json.dumps(rec["schema"])
    return dataset, {CONTEXT_TAG: context(stage)}


def stage_inputs(paths: Iterable[Path], slug: str, stage: str, results_dir: Path, store: str
                 ) -> tuple[list[tuple[dict, dict]], list[dict[str, Any]]]:
    """A stage's ``--in`` paths (existing ones) as dataset inputs and model-registry entries: a path that is (or
    sits beside, same stem) a logged model is that model; other files under ``raw``/``interim``/``processed`` are
    datasets."""
    datasets, models = [], []
    for p in paths:
        p = Path(p)
        if not p.exists():
            continue
        found = registered_models(results_dir, store, [p])
        if found:
            models += [e for e in found if e["model_id"] not in [m["model_id"] for m in models]]
        elif kind_of(p, slug) == "data":
            datasets.append(dataset_input(p, slug, stage, results_dir))
    return datasets, models


# -- the model registry -----------------------------------------------------------------------------------------

def registry_file(results_dir: Path) -> Path:
    return Path(results_dir).resolve() / ".tracking" / "models.json"


#: Above this size a registered model file is recognised by its size alone (no re-hash per evaluate job).
REHASH_MAX_BYTES = 256 * 2**20


def stamp(path: Path) -> int:
    """Bytes of a file or of a directory's files. (Not the mtime: Snakemake touches outputs after a job.)"""
    path = Path(path)
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(f.stat().st_size for f in files)


def _unchanged(path: Path, entry: Mapping[str, Any]) -> bool:
    """Whether ``path`` is still the model of registry ``entry``: same size and, up to
    :data:`REHASH_MAX_BYTES`, same sha256."""
    size = stamp(path)
    if size != entry.get("stamp"):
        return False
    return size > REHASH_MAX_BYTES or sha256_of(path) == entry.get("sha256")


def register_model(results_dir: Path, store: str, path: Path, entry: Mapping[str, Any]) -> None:
    """Record that the model file ``path`` is LoggedModel ``entry["model_id"]`` in ``store`` (with its size,
    :func:`stamp`; ``entry["sha256"]`` is its hash)."""
    from .io import file_lock

    reg = registry_file(results_dir)
    reg.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(reg.with_suffix(".lock")):
        try:
            data = json.loads(reg.read_text()) if reg.exists() else {}
        except json.JSONDecodeError:
            data = {}
        data[f"{store}|{Path(path).resolve()}"] = {**entry, "stamp": stamp(path)}
        tmp = reg.with_name(f".{reg.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, reg)


def registered_models(results_dir: Path, store: str, paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The registry entries of ``paths`` in ``store`` (a file logged as a model and not rewritten since)."""
    reg = registry_file(results_dir)
    if not reg.exists():
        return []
    try:
        data = json.loads(reg.read_text())
    except json.JSONDecodeError:
        return []
    out: list[dict[str, Any]] = []
    for p in paths:
        p = Path(p).resolve()
        keys = [f"{store}|{p}"]
        # a train job that writes chunk0.json and chunk0.pt and logs the .pt: reading the .json is reading that model
        keys += sorted(k for k in data if k.startswith(f"{store}|{p.parent}/{p.stem}.") and k != keys[0])
        for key in keys:
            entry = data.get(key)
            path = Path(key[len(store) + 1:])
            if entry is not None and path.exists() and _unchanged(path, entry):
                if entry["model_id"] not in [e["model_id"] for e in out]:
                    out.append(entry)
                break
    return out


def matching_models(entries: Sequence[Mapping[str, Any]], arm: str | None, seed: str | None) -> list[str]:
    """Model ids an evaluate run's metrics describe one-to-one: the run is of one arm (tag ``arm``) and, if it is
    of one seed (tag ``seed``), the model is that seed's alone; without a seed tag, the arm's only model."""
    if not arm:
        return []
    of_arm = [e for e in entries if e.get("arm") == arm]
    if seed is not None:
        return [e["model_id"] for e in of_arm if [str(s) for s in e.get("seeds") or []] == [str(seed)]]
    return [of_arm[0]["model_id"]] if len(of_arm) == 1 else []


# -- descriptions -----------------------------------------------------------------------------------------------

def _fmt(value: Any) -> str:
    from .claims import format_numbers

    return format_numbers(value)


def deciding_numbers(claim: Mapping[str, Any], limit: int = 160) -> str:
    """The claim's ``key_numbers`` (else its statistic) as ``k = v; ...``, shortened to ``limit`` characters."""
    text = " ".join(_fmt(claim.get("key_numbers") or claim.get("statistic")).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def method_line(readme: Path, limit: int = 300) -> str:
    """One line on the method from a study README: the first paragraph under a heading about the method (``The
    method in brief``, ``What the paper does``, ...), else the first paragraph of the introduction (before the first
    ``##``) without a link — the citation comes first — else the introduction's first paragraph with its links
    removed; cut at a sentence end within ``limit`` characters."""
    if readme is None or not Path(readme).exists():
        return ""
    blocks = re.split(r"\n\s*\n", Path(readme).read_text(encoding="utf-8"))
    paragraphs: list[tuple[int, str, str]] = []  # (heading level, heading, text)
    level, heading = 1, ""
    for block in blocks:
        lines = block.strip().splitlines()
        while lines and lines[0].startswith("#"):
            mark = lines.pop(0)
            level, heading = len(mark) - len(mark.lstrip("#")), mark.lstrip("#").strip().lower()
        text = " ".join(line.strip() for line in lines)
        if text and not text.startswith(("|", "```", "- ", "* ", ">", "1.", "Public API", "---")):
            paragraphs.append((level, heading, text))
    method = re.compile(r"method|idea|in brief|in short|in our words|what the paper|overview|summary|approach")
    intro = [t for lvl, _, t in paragraphs if lvl == 1]
    candidates = ([t for lvl, h, t in paragraphs if lvl > 1 and method.search(h)]
                  + [t for t in intro if "http" not in t and "](" not in t]
                  + [re.sub(r"\s*\(?<?https?://\S+", "", t) for t in intro] + [t for _, _, t in paragraphs])
    text = re.sub(r"\s+", " ", (candidates or [""])[0]).strip()
    if text.endswith(":") and ". " in text:  # "... Module map:" introduces a list: end at the sentence before
        text = text[:text.rfind(". ") + 1]
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("; "))
    return (cut[:end + 1] if end > 80 else cut.rstrip() + "…").strip()


def experiment_note(slug: str, docs: Mapping[str, Mapping[str, Any]], readme: str,
                    readme_file: Path | None = None) -> str:
    """The Markdown description of experiment ``icml25/<slug>``: paper and venue, the method in a line (from
    ``readme_file``), the claims with their verdicts and deciding numbers per scale (``docs``:
    ``{scale: claims document}``), the README path ``readme`` (as shown)."""
    first = next(iter(docs.values()), {}) if docs else {}
    paper = dict(first.get("paper") or {})
    title = paper.get("title") or slug
    lines = [f"## {title}", ""]
    venue = paper.get("ref") or paper.get("url")
    if venue:
        lines += [f"*{venue}*", ""]
    method = method_line(readme_file) if readme_file is not None else ""
    if method:
        lines += [f"**Method.** {method}", ""]
    for scale, doc in docs.items():
        claims = [c for c in doc.get("claims", []) if c.get("kind", "claim") == "claim"]
        checks = [c for c in doc.get("claims", []) if c.get("kind") == "check"]
        seeds = doc.get("seeds") or []
        lines += [f"### Scale `{scale}` · data `{doc.get('data_source', '')}` · {len(seeds)} seeds", ""]
        if claims:
            lines += ["| claim | source | verdict | deciding numbers | threshold |", "|---|---|---|---|---|"]
            for c in claims:
                cells = [f"{c['id']}: {c.get('title') or c['statement']}", c.get("source", ""), f"**{c['verdict']}**",
                         deciding_numbers(c), c.get("threshold", "")]
                lines.append("| " + " | ".join(str(x).replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
            lines.append("")
        if checks:
            hold = sum(c.get("holds") is True for c in checks)
            failed = [c["id"] for c in checks if c.get("holds") is False]
            lines += [f"Checks: {hold} of {len(checks)} hold" + (f"; FAIL: {', '.join(failed)}" if failed else ""),
                      ""]
    lines += [f"Study README: `{readme}` · claims: `results/<scale>/{slug}/claims.json` · refreshed by the "
              "evaluate stage."]
    return _cap("\n".join(lines), EXPERIMENT_NOTE_MAX)


def parent_note(slug: str, scale: str, invocation: str, counts: Mapping[str, int] | None = None) -> str:
    """The short description of a study's pipeline parent run."""
    text = (f"Pipeline run of **{slug}** at scale `{scale}`, invocation `{invocation}` "
            f"(one Snakemake run; the stage jobs are nested under it).")
    if counts:
        text += ("\n\nVerdicts: " + f"{counts.get('claims_reproduced', 0)} reproduced · "
                 f"{counts.get('claims_not_reproduced', 0)} not reproduced · "
                 f"{counts.get('claims_inconclusive', 0)} inconclusive; checks: {counts.get('checks_hold', 0)} hold, "
                 f"{counts.get('checks_failed', 0)} failed.")
    return _cap(text, RUN_NOTE_MAX)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 2] + "\n…"


def claims_by_scale(claims_path: Path, slug: str) -> dict[str, dict[str, Any]]:
    """``{scale: document}`` of ``claims_path`` (``<results>/<scale>/<slug>/claims.json``) and of the same study's
    ``claims.json`` at the other scales beside it; the given one first."""
    from .config import SCALES

    claims_path = Path(claims_path)
    out: dict[str, dict[str, Any]] = {}
    root = claims_path.parent.parent.parent
    candidates = [claims_path] + [root / s / slug / "claims.json" for s in SCALES]
    for p in candidates:
        if not p.exists():
            continue
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        scale = str(doc.get("scale") or p.parent.parent.name)
        if doc.get("study") == slug and scale not in out:
            out[scale] = doc
    return out


# -- the claims table as a logged table -------------------------------------------------------------------------

#: The claims table's columns in MLflow (the summary run's ``claims_table.json``), as named in ``claims.csv``.
TABLE_COLUMNS = ("study", "claim", "kind", "source", "tier", "verdict", "key_numbers", "threshold", "evidence_n",
                 "evidence_unit", "ci_method", "scale", "title")
CLAIMS_TABLE_FILE = "claims_table.json"


def log_claims_table(run: Any, table: Any) -> None:
    """Log the cross-study claims table (a ``core.summary.claims_table`` DataFrame) on the summary run as a
    table artifact (:meth:`~icml25.core.tracking.StageRun.log_table`): one row per claim and check, the columns
    of :data:`TABLE_COLUMNS` that the table has."""
    columns = [c for c in TABLE_COLUMNS if c in table.columns]
    run.log_table(table[columns].to_dict("records"), columns, CLAIMS_TABLE_FILE)


def table_json(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> dict[str, Any]:
    """MLflow's ``log_table`` file format (pandas ``to_json(orient="split", index=False)``):
    ``{"columns": [...], "data": [[...], ...]}``."""
    return {"columns": list(columns), "data": [[_cell(r.get(c)) for c in columns] for r in rows]}


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    return _fmt(value)


def logged_artifacts_tag(paths: Sequence[str]) -> str:
    """The ``mlflow.loggedArtifacts`` value that marks ``paths`` as tables (what ``log_table`` sets)."""
    return json.dumps([{"path": p, "type": "table"} for p in paths])
