"""Paper data: the real CoastalBench files (spec "Data", "Checksums").

* OSN S3 (endpoint https://udel1.osn.mghpcc.org, bucket ``coastalbench-data``, anonymous): :func:`list_s3` lists
  keys with the plain S3 ListObjectsV2 REST call (equivalent to boto3 with ``UNSIGNED``; no extra package) and
  :func:`write_manifest` turns them into the study's ``manifest.csv`` (sha256 ``UNPINNED``: the bucket publishes
  none; size = Content-Length, etag).
* Downloads go through ``icml25.core.download.fetch``: refused unless the run opts in to trust on first use
  (``trust_unpinned``), then size checked, the file opened as netCDF with the variables preprocessing needs, the
  sha256 pinned in ``<dest>.sha256`` and enforced afterwards; single-part S3 ETags (plain MD5) are checked too.
* HF preview: :func:`list_hf_preview` reads the dataset tree at a pinned revision (LFS sha256 per chunk file);
  :func:`zarr_tree_hash` is the per-``.zarr`` tree hash.

Run ``python -m icml25.studies.coastalbench.remote --help`` (needs internet) to refresh the manifest.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

ENDPOINT = "https://udel1.osn.mghpcc.org"
BUCKET = "coastalbench-data"
HF_DATASET = "YupuZ/CoastalBench-preview"
_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_DAY = re.compile(r"(\d{8})")


def parse_list_objects(xml_text: str) -> tuple[list[dict], str | None]:
    """Parse one ListObjectsV2 response: ([{key, size, etag}], next continuation token or None)."""
    root = ET.fromstring(xml_text)
    ns = _S3_NS if root.tag.startswith(_S3_NS) else ""
    items = [{"key": c.findtext(f"{ns}Key"), "size": int(c.findtext(f"{ns}Size") or 0),
              "etag": (c.findtext(f"{ns}ETag") or "").strip('"')} for c in root.iter(f"{ns}Contents")]
    truncated = (root.findtext(f"{ns}IsTruncated") or "false").lower() == "true"
    return items, (root.findtext(f"{ns}NextContinuationToken") if truncated else None)


def list_s3(prefix: str = "", endpoint: str = ENDPOINT, bucket: str = BUCKET) -> list[dict]:
    """All keys under ``prefix`` (anonymous ListObjectsV2, paginated)."""
    out, token = [], None
    while True:
        query = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
        url = f"{endpoint}/{bucket}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=60) as resp:
            items, token = parse_list_objects(resp.read().decode())
        out += items
        if not token:
            return out


def write_manifest(items: list[dict], path: str | Path, endpoint: str = ENDPOINT, bucket: str = BUCKET) -> int:
    """manifest.csv rows (history files only), sha256 ``UNPINNED`` (pinned on a trusted first download)."""
    rows = [i for i in items if i["key"].endswith(".nc") and _DAY.search(Path(i["key"]).name)]
    from icml25.core.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:  # a reader never sees half a manifest
        w = csv.writer(fh)
        w.writerow(["name", "url", "sha256", "size", "licence", "mirror_path", "etag"])
        for i in sorted(rows, key=lambda r: r["key"]):
            w.writerow([Path(i["key"]).name, f"{endpoint}/{bucket}/{urllib.parse.quote(i['key'])}", "UNPINNED",
                        i["size"],
                        "not stated", f"coastalbench/{i['key']}", i["etag"]])
    return len(rows)


def month_entries(manifest: str | Path, month: str) -> list:
    """Manifest entries whose file name carries a date in ``month`` (YYYY-MM)."""
    from icml25.core.download import read_manifest

    ym = month.replace("-", "")
    if not re.fullmatch(r"\d{6}", ym):
        raise ValueError(f"month must be YYYY-MM, got {month!r}")
    entries = [e for e in read_manifest(manifest).values() if (m := _DAY.search(e.name)) and m.group(1)[:6] == ym]
    if not entries:
        raise ValueError(f"{manifest}: no file for month {month} (refresh it with `python -m "
                         "icml25.studies.coastalbench.remote --list`)")
    return sorted(entries, key=lambda e: e.name)


def etags(manifest: str | Path) -> dict[str, str]:
    with open(manifest, newline="") as fh:
        return {r["name"]: r.get("etag", "") or "" for r in csv.DictReader(fh)}


def md5_file(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_month(manifest: str | Path, month: str, dest_dir: Path, mirror: str | None = None, *,
                trust_unpinned: bool = False, variables: tuple[str, ...] = ()) -> list[Path]:
    """Fetch (verified, pinned) every file of one month; each must open as netCDF holding ``variables``; check
    single-part ETags (MD5). ``trust_unpinned``: accept rows without a sha256 on first use (logged)."""
    from icml25.core.download import DownloadError, fetch, netcdf_check

    tags = etags(manifest)
    out = []
    for entry in month_entries(manifest, month):
        path = fetch(entry, Path(dest_dir) / entry.name, mirror, trust_unpinned=trust_unpinned,
                     check=netcdf_check(variables) if variables else None)
        tag = tags.get(entry.name, "")
        if tag and "-" not in tag and md5_file(path) != tag:
            path.unlink()
            raise DownloadError(f"{entry.url}: MD5 ETag mismatch for {entry.name}: expected {tag}")
        out.append(path)
    return out


def list_hf_preview(revision: str, dataset: str = HF_DATASET) -> list[dict]:
    """Files of the preview at a pinned revision: [{path, size, lfs_sha256}] (HF tree API, recursive)."""
    url = f"https://huggingface.co/api/datasets/{dataset}/tree/{revision}?recursive=true"
    with urllib.request.urlopen(url, timeout=60) as resp:
        tree = json.loads(resp.read().decode())
    return [{"path": t["path"], "size": t.get("size"), "lfs_sha256": (t.get("lfs") or {}).get("oid", "")}
            for t in tree if t.get("type") == "file"]


def zarr_tree_hash(files: list[dict]) -> str:
    """One hash per .zarr: sha256 over the sorted "path sha256" lines of its chunk files."""
    lines = sorted(f"{f['path']} {f['lfs_sha256']}" for f in files)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Refresh the study's manifest.csv from the OSN bucket (needs internet)."""
    p = argparse.ArgumentParser(prog="python -m icml25.studies.coastalbench.remote", description=main.__doc__)
    p.add_argument("--list", action="store_true", help="list the bucket and rewrite --out")
    p.add_argument("--prefix", default="", help="key prefix to list")
    p.add_argument("--out", default=str(Path(__file__).with_name("manifest.csv")), help="manifest path")
    args = p.parse_args(argv)
    if not args.list:
        p.print_help()
        return 0
    n = write_manifest(list_s3(args.prefix), args.out)
    print(f"{args.out}: {n} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
