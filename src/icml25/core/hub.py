"""Hugging Face hub models at a recorded revision: the model manifest of a study.

A study that loads hub models lists them in ``src/icml25/studies/<slug>/models.csv``::

    name,repo_id,revision,licence
    reward,Skywork/Skywork-Reward-Llama-3.1-8B,<40-hex commit>,Llama 3.1 community licence

``revision`` is the commit every load uses, or ``UNPINNED`` where no commit was knowable offline. Loading such a
row needs the explicit opt-in (``trust_unpinned``, the pipeline's ``trust_unpinned: true``); the hub's current
commit is then resolved once, used for the load, and recorded (MLflow params ``hub/<name>/...`` and the
``models`` block of ``claims.json``), so a later run can be compared with it. A local directory (a rehearsal's tiny
model, or weights placed by hand) replaces the hub id through ``local_dir``; its revision is
``local:<sha256 over its files>``.

Nothing here sets ``trust_remote_code``: :meth:`ResolvedModel.kwargs` always passes ``trust_remote_code=False``, so
a model whose hub repository ships custom code must be loaded with the library's own classes.
"""
from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

UNPINNED = "UNPINNED"
COLUMNS = ("name", "repo_id", "revision", "licence")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class HubError(ValueError):
    """A model manifest that does not validate, or an unpinned model loaded without the opt-in."""


@dataclass(frozen=True)
class HubModel:
    """One row of a study's ``models.csv``."""

    name: str
    repo_id: str
    revision: str  # 40-hex commit or UNPINNED
    licence: str

    @property
    def pinned(self) -> bool:
        return self.revision != UNPINNED


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready to load: ``from_pretrained(m.path, **m.kwargs())``.

    ``source``: ``pinned`` (the manifest's commit), ``resolved`` (UNPINNED, the hub's commit resolved under the
    opt-in) or ``local`` (a directory; ``revision`` = ``local:<sha256 over its files>``).
    """

    name: str
    repo_id: str
    path: str
    revision: str
    source: str

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``from_pretrained``: the commit (none for a local directory) and
        ``trust_remote_code=False``."""
        out: dict[str, Any] = {"trust_remote_code": False}
        if self.source != "local":
            out["revision"] = self.revision
        return out

    def record(self) -> dict[str, str]:
        return {"repo_id": self.repo_id, "revision": self.revision, "source": self.source}


def read_models(path: str | Path) -> dict[str, HubModel]:
    """The rows of a model manifest by name; raises :class:`HubError` naming the file, row and column of the first
    problem (missing column, bad name, repo id or revision, duplicate name, empty licence)."""
    path = Path(path)
    if not path.is_file():
        raise HubError(f"{path}: model manifest missing")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise HubError(f"{path}: column(s) {missing} missing (need {list(COLUMNS)})")
        out: dict[str, HubModel] = {}
        for i, row in enumerate(reader, start=2):  # line 1 is the header
            at = f"{path}: line {i}"
            name, repo, rev, lic = (str(row.get(c) or "").strip() for c in COLUMNS)
            if not _NAME.match(name):
                raise HubError(f"{at}: column name: {name!r} is not a lower-case identifier")
            if name in out:
                raise HubError(f"{at}: column name: {name!r} repeats an earlier row")
            if not _REPO.match(repo):
                raise HubError(f"{at}: column repo_id: {repo!r} is not a hub id (owner/name)")
            if rev != UNPINNED and not _COMMIT.match(rev):
                raise HubError(f"{at}: column revision: {rev!r} is neither a 40-hex commit nor {UNPINNED} "
                               "(branch and tag names move; pin the commit)")
            if not lic:
                raise HubError(f"{at}: column licence: empty")
            out[name] = HubModel(name, repo, rev, lic)
    return out


def model_by_repo(path: str | Path, repo_id: str, revision: str | None = None, *, what: str = "model",
                  revision_key: str = "revision") -> HubModel:
    """The row of the model manifest at ``path`` whose ``repo_id`` is ``repo_id``; ``revision`` (a 40-hex commit
    from the study's config key ``revision_key``) replaces the row's. Raises :class:`HubError` naming the file for
    an id that is not listed, or the key for a revision that is not a commit."""
    rows = read_models(path)
    row = next((m for m in rows.values() if m.repo_id == repo_id), None)
    if row is None:
        raise HubError(f"{path}: {what} {repo_id!r} is not one of {sorted(m.repo_id for m in rows.values())}")
    if revision is not None:
        if not _COMMIT.match(revision):
            raise HubError(f"{revision_key}: {revision!r} of {what} {repo_id!r} is not a 40-hex commit (branch and "
                           "tag names move)")
        row = HubModel(row.name, row.repo_id, revision, row.licence)
    return row


def require_listed(path: str | Path, repo_id: str, *, key: str, local_key: str) -> None:
    """Config-time check that ``repo_id`` (the study's config key ``key``) is a ``repo_id`` of the model manifest at
    ``path``; raises ``ValueError`` (pydantic reports it under the key) naming the manifest, the ids it lists and
    ``local_key``, where a local directory goes instead."""
    known = sorted(m.repo_id for m in read_models(path).values())
    if repo_id not in known:
        where = f"{Path(path).parent.name}/{Path(path).name}"
        raise ValueError(f"{key}: {repo_id!r} is not a repo_id of {where} {known} (a local directory goes in "
                         f"{local_key})")


def directory_digest(path: str | Path) -> str:
    """sha256 over a directory's files (relative path and bytes, in sorted order): the revision of a local model."""
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def hub_commit(repo_id: str, revision: str = "main") -> str:  # pragma: no cover - needs the network
    """The commit the hub serves for ``repo_id`` at ``revision`` now (one API call)."""
    from huggingface_hub import HfApi

    return str(HfApi().model_info(repo_id, revision=revision).sha)


def resolve(model: HubModel, *, trust_unpinned: bool = False, local_dir: str | Path | None = None,
            commit_of=hub_commit) -> ResolvedModel:
    """The path and commit to load ``model`` at.

    ``local_dir``: a directory holding the model (``save_pretrained`` layout) that replaces the hub id. A pinned
    row loads at its commit. An UNPINNED row raises :class:`HubError` unless ``trust_unpinned``; then
    ``commit_of(repo_id)`` (the hub's current commit, one network call) is resolved once and used.
    """
    if local_dir is not None:
        d = Path(local_dir)
        if not d.is_dir():
            raise HubError(f"model {model.name!r}: local directory {d} does not exist")
        return ResolvedModel(model.name, model.repo_id, str(d), f"local:{directory_digest(d)}", "local")
    if model.pinned:
        return ResolvedModel(model.name, model.repo_id, model.repo_id, model.revision, "pinned")
    if not trust_unpinned:
        raise HubError(f"model {model.name!r} ({model.repo_id}) has no pinned revision ({UNPINNED} in its "
                       "models.csv): pin the commit there, or run with trust_unpinned=true to resolve the hub's "
                       "current commit once (it is recorded in MLflow and claims.json)")
    commit = commit_of(model.repo_id)
    if not _COMMIT.match(commit):
        raise HubError(f"model {model.name!r} ({model.repo_id}): the hub answered {commit!r}, not a commit")
    return ResolvedModel(model.name, model.repo_id, model.repo_id, commit, "resolved")


def record(run: Any, models: Iterable[ResolvedModel]) -> dict[str, dict[str, str]]:
    """Log ``hub/<name>/{repo_id,revision,source}`` as MLflow params of ``run`` (when given) and return the
    mapping for ``write_claims(..., models=...)``."""
    out = {m.name: m.record() for m in models}
    if run is not None:
        run.log_params({f"hub/{n}/{k}": v for n, rec in out.items() for k, v in rec.items()})
    return out


def as_claims_block(models: Mapping[str, Mapping[str, str]] | None) -> dict[str, dict[str, str]]:
    """The ``models`` block of ``claims.json``, validated: every entry has repo_id, revision and source."""
    out: dict[str, dict[str, str]] = {}
    for name, rec in (models or {}).items():
        missing = [k for k in ("repo_id", "revision", "source") if not rec.get(k)]
        if missing:
            raise HubError(f"models.{name}: {missing} missing")
        out[str(name)] = {k: str(rec[k]) for k in ("repo_id", "revision", "source")}
    return out
