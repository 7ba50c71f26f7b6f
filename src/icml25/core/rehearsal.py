"""The paper-scale rehearsal: a study's *paper* DAG run on CPU on miniature files in the real formats.

A researcher's first paper-scale run happens on a cluster, after hours of queueing; a stage that only fails there
is expensive. The rehearsal runs the same paper rules — the same download and verification code (through a
directory mirror), the same loaders and preprocessing, the paper's model classes at reduced width and depth, the
same train / evaluate / claims code — on files that have the exact real formats (a CIFAR-10 pickle tarball, a
bz2 CSV with the real columns, ...) but a few rows, generated deterministically by the study's own script:

    snakemake --cores all --config scale=paper rehearsal=true studies=[cat_iv]

What a study provides:

* ``src/icml25/studies/<slug>/rehearsal.py`` with ``write_miniatures(root: Path, manifest: dict[str,
  ManifestEntry]) -> list[str]``: writes each miniature file at ``root / entry.mirror_path`` (the names of the
  manifest rows it wrote; rows it leaves out are not downloaded by the rehearsal's paper DAG either, so the study
  must not need them). Deterministic: same bytes on every call (fixed seeds, no timestamps in archives).
* optionally, in the same module, ``write_manual(root: Path) -> None``: data that has no download (licensed,
  placed by hand on a cluster, e.g. ImageNet class folders) written as a miniature tree under ``root`` =
  ``results/rehearsal/mirror/manual/<slug>/`` in the exact layout the study's loader checks; the rehearsal yaml
  points the study's placement key at that relative path (jobs run in the repository root).
  A study that downloads nothing (its data are generated at every scale) has no ``manifest.csv``; its
  ``write_miniatures`` returns ``[]`` and the rehearsal runs its paper DAG at reduced size only.
* ``config/rehearsal/<slug>.yaml``: overrides applied on top of the paper scale (few seeds, small widths, few
  steps, ``device: cpu``), validated by the study's ``Config`` like any scale.

What core does: :func:`build_mirror` (the Snakefile's ``onstart`` when ``rehearsal=true``) writes each study's
miniatures in a mirror of its own, ``results/rehearsal/mirror/files/<slug>/`` (two studies may rehearse the same
URL with different miniatures), and, per study, a copy of its ``manifest.csv`` in which only the ``sha256``,
``size`` (and ``md5``) of the miniature rows differ; jobs get ``--rehearsal <that dir>`` and ``--mirror <that
dir>/files/<slug>`` and ``--data-source remote``, and :func:`manifest_override` makes ``core.download.read_manifest`` read the
rehearsal manifest, so every file is fetched and hash-checked exactly as on the cluster. Results go to
``results/rehearsal/`` (never mixed with ``results/paper/``); claims.json keeps ``scale: paper``, says
``rehearsal: true`` and has no claim decided on the paper's data (``core.claims.mark_rehearsal``).
"""
from __future__ import annotations

import csv
import importlib
import importlib.util
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

ENV = "ICML25_REHEARSAL"  #: the rehearsal directory of a job (set by the stage CLI's --rehearsal)
DIRNAME = "rehearsal"  #: results/<DIRNAME>/ holds a rehearsal's results; its mirror is results/rehearsal/mirror
CONFIG_DIR = Path("config") / "rehearsal"


class RehearsalError(ValueError):
    """A study without a rehearsal, or a miniature that does not match its manifest row."""


def has_rehearsal(slug: str, root: str | Path = ".") -> bool:
    """Whether a study provides both pieces: ``studies/<slug>/rehearsal.py`` and ``config/rehearsal/<slug>.yaml``."""
    return (importlib.util.find_spec(f"icml25.studies.{slug}.rehearsal") is not None
            and (Path(root) / CONFIG_DIR / f"{slug}.yaml").is_file())


def require_rehearsals(slugs: Iterable[str], root: str | Path = ".") -> None:
    """Raise :class:`RehearsalError` naming every selected study that has no rehearsal yet."""
    missing = [s for s in slugs if not has_rehearsal(s, root)]
    if missing:
        raise RehearsalError(f"rehearsal: no rehearsal for {missing} yet (needs src/icml25/studies/<slug>/"
                             f"rehearsal.py and {CONFIG_DIR}/<slug>.yaml); select studies that have one")


def package_dir(slug: str) -> Path:
    """The directory of ``icml25.studies.<slug>`` (found without importing the package)."""
    spec = importlib.util.find_spec(f"icml25.studies.{slug}")
    if spec is None or not spec.submodule_search_locations:
        raise RehearsalError(f"rehearsal: no study package icml25.studies.{slug}")
    return Path(list(spec.submodule_search_locations)[0])


def manifest_dir(rehearsal_dir: str | Path) -> Path:
    return Path(rehearsal_dir) / "manifests"


def files_dir(rehearsal_dir: str | Path, slug: str) -> Path:
    """A study's own mirror, ``<rehearsal_dir>/files/<slug>/`` (its miniatures at their ``mirror_path``): one per
    study, because two studies may rehearse the same URL (CIFAR-10, MNIST) with different miniatures."""
    return Path(rehearsal_dir) / "files" / slug


def manual_dir(rehearsal_dir: str | Path, slug: str) -> Path:
    """Where a study's ``write_manual`` puts its hand-placed miniatures: ``<rehearsal_dir>/manual/<slug>/``."""
    return Path(rehearsal_dir) / "manual" / slug


def build_mirror(slugs: Sequence[str], out: str | Path) -> dict[str, list[str]]:
    """Write every selected study's miniatures in its own mirror (``files_dir(out, slug) / <mirror_path>``) and its
    rehearsal manifest at ``out/manifests/<slug>/manifest.csv``; return ``{slug: rows written}``. Idempotent:
    deterministic writers give the same bytes, so a second call changes nothing."""
    from .download import read_manifest

    out = Path(out)
    written: dict[str, list[str]] = {}
    for slug in slugs:
        module = importlib.import_module(f"icml25.studies.{slug}.rehearsal")
        manifest_path = package_dir(slug) / "manifest.csv"
        has_manifest = manifest_path.is_file()  # a study without downloads (generated data) has none
        entries = read_manifest(manifest_path, rehearsal=False) if has_manifest else {}
        files = files_dir(out, slug)
        names = list(module.write_miniatures(files, entries))
        if hasattr(module, "write_manual"):
            module.write_manual(manual_dir(out, slug))
        unknown = sorted(set(names) - set(entries))
        if unknown:
            raise RehearsalError(f"{slug} rehearsal: wrote rows {unknown} that are not in its manifest.csv")
        written[slug] = names
        if has_manifest:
            _write_manifest(manifest_path, files, names, manifest_dir(out) / slug / "manifest.csv")
    return written


def _write_manifest(real: Path, mirror: Path, names: Sequence[str], dest: Path) -> None:
    """The real manifest with the ``sha256``/``size``/``md5`` of the miniature rows replaced (other rows kept as they
    are, so a rehearsal that needed them would fail on their real hashes)."""
    from .download import md5_file, sha256_file
    from .io import write_text

    with open(real, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    for row in rows:
        if row["name"] in names:
            path = mirror / row["mirror_path"]
            if not path.is_file():
                raise RehearsalError(f"rehearsal: {real.parent.name} row {row['name']}: no miniature at {path}")
            row["sha256"], row["size"] = sha256_file(path), str(path.stat().st_size)
            if "md5" in fields and row.get("md5"):
                row["md5"] = md5_file(path)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_text(dest, buf.getvalue())


def manifest_override(path: str | Path) -> Path | None:
    """In a rehearsal job (``$ICML25_REHEARSAL`` set), the rehearsal manifest that replaces the study manifest at
    ``path`` (``.../studies/<slug>/manifest.csv``); None otherwise. A rehearsal without that file is an error,
    never a silent fallback to the real hashes."""
    root = os.environ.get(ENV)
    if not root:
        return None
    slug = Path(path).resolve().parent.name
    override = manifest_dir(root) / slug / "manifest.csv"
    if not override.is_file():
        raise RehearsalError(f"rehearsal: {override} missing (the Snakefile's onstart writes it; run the pipeline "
                             f"with --config rehearsal=true, or `icml25 rehearsal {slug}`)")
    return override
