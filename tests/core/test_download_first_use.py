"""Issue 36.2-36.3: trust on first use pins only a whole file of the right kind and size; a refused pin names the
pin file to delete; a multi-file download failing on file 2 of 3 leaves no orphan pins."""
from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from icml25.core.download import (DownloadError, ManifestEntry, all_or_nothing, csv_check, fetch, record_path)


def _entry(name: str, mirror_path: str, size: int | None = None) -> ManifestEntry:
    return ManifestEntry(name, f"https://example.org/{mirror_path}", "", size, "test", mirror_path)


def _csv(rows: int) -> bytes:
    return ("date,a,b\n" + "".join(f"2020-01-{i + 1:02d},{i},{2 * i}\n" for i in range(rows))).encode()


def _tgz(n: int = 4000) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        payload = bytes(range(256)) * (n // 256)
        info = tarfile.TarInfo("x.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


@pytest.mark.parametrize("name,good,cut", [
    ("t.tar.gz", _tgz(), lambda b: b[: len(b) // 2]),
    ("t.gz", gzip.compress(b"x" * 10000), lambda b: b[:-6]),
    ("t.csv", _csv(40), lambda b: b[:-5]),                            # cut inside the last row
    ("t.bin", b"\x00" * 100, lambda b: b"<!DOCTYPE html><html><body>Sign in</body></html>"),
    ("t.bin", b"\x00" * 100, lambda b: b""),
], ids=["tar.gz-truncated", "gz-truncated", "csv-cut-in-a-row", "html-page", "empty"])  # stable ids for xdist
def test_first_use_refuses_a_truncated_html_or_empty_file_and_pins_nothing(tmp_path, name, good, cut):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / name).write_bytes(cut(good))
    dest = tmp_path / "raw" / name
    with pytest.raises(DownloadError, match=name.replace(".", r"\.")):
        fetch(_entry(name, name), dest, mirror, trust_unpinned=True, progress=False)
    assert not dest.exists() and not record_path(dest).exists()
    (mirror / name).write_bytes(good)  # the whole file passes and is pinned
    fetch(_entry(name, name), dest, mirror, trust_unpinned=True, progress=False)
    assert dest.read_bytes() == good and record_path(dest).exists()


def test_first_use_checks_the_manifest_size(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"12345")
    with pytest.raises(DownloadError, match="size mismatch"):
        fetch(_entry("f.bin", "f.bin", size=6), tmp_path / "o" / "f.bin", tmp_path, trust_unpinned=True,
              progress=False)


def test_a_cut_at_a_row_boundary_is_refused_by_a_row_count_or_a_size(tmp_path):
    """23 of 40 rows, cut at a row boundary: a well-formed CSV, so only the expected rows or size can refuse it."""
    (tmp_path / "t.csv").write_bytes(_csv(40)[: _csv(40).index(b"2020-01-24")])
    dest = tmp_path / "raw" / "t.csv"
    with pytest.raises(DownloadError, match="23 data rows, expected 40"):
        fetch(_entry("t.csv", "t.csv"), dest, tmp_path, trust_unpinned=True, progress=False,
              check=csv_check(["date"], rows=40))
    with pytest.raises(DownloadError, match="size mismatch"):
        fetch(_entry("t.csv", "t.csv", size=len(_csv(40))), dest, tmp_path, trust_unpinned=True, progress=False)
    assert not dest.exists() and not record_path(dest).exists()


def test_csv_check_reads_whole_rows_to_the_end(tmp_path):
    f = tmp_path / "x.csv"
    f.write_bytes(_csv(40)[:-5])
    with pytest.raises(ValueError, match="fields|newline"):
        csv_check(["date"])(f)
    f.write_bytes(b"date,a,b\n")
    with pytest.raises(ValueError, match="no data rows"):
        csv_check(["date"])(f)
    f.write_bytes(_csv(3))
    csv_check(["date", "a"])(f)


def test_a_refused_pin_names_the_pin_file_to_delete(tmp_path):
    mirror = tmp_path / "m"
    mirror.mkdir()
    dest = tmp_path / "raw" / "t.csv"
    dest.parent.mkdir()
    record_path(dest).write_text("0" * 64 + "\n")  # a pin from an earlier (bad) first use
    (mirror / "t.csv").write_bytes(_csv(5))
    with pytest.raises(DownloadError) as err:
        fetch(_entry("t.csv", "t.csv"), dest, mirror, trust_unpinned=True, progress=False)
    assert "pinned on first use" in str(err.value) and f"delete {record_path(dest)}" in str(err.value)


def test_a_download_failing_on_file_2_of_3_leaves_no_orphan_pins(tmp_path):
    mirror = tmp_path / "m"
    mirror.mkdir()
    names = ["a.csv", "b.csv", "c.csv"]
    (mirror / "a.csv").write_bytes(_csv(3))
    (mirror / "b.csv").write_bytes(b"")  # file 2 fails
    (mirror / "c.csv").write_bytes(_csv(3))
    dests = [tmp_path / "raw" / n for n in names]
    with pytest.raises(DownloadError, match="b.csv"):
        with all_or_nothing(dests):
            for n, d in zip(names, dests):
                fetch(_entry(n, n), d, mirror, trust_unpinned=True, progress=False)
    assert not any(d.exists() or record_path(d).exists() for d in dests)
    assert [p.name for p in (tmp_path / "raw").iterdir()] == []


def test_pid_genimage_download_failing_on_archive_2_leaves_no_orphan_pins(tmp_path, monkeypatch):
    import zipfile

    from icml25.core.cli import Stage
    from icml25.studies.pid import stages

    mirror = tmp_path / "mirror"
    rows = ["name,url,sha256,size,licence,mirror_path"]
    for i, name in enumerate(["a.zip", "b.zip", "c.zip"]):
        rows.append(f"{name},https://example.org/{name},UNPINNED,,t,g/{name}")
        (mirror / "g").mkdir(parents=True, exist_ok=True)
        if i == 1:
            (mirror / "g" / name).write_bytes(b"PK\x03\x04 not a zip")
        else:
            with zipfile.ZipFile(mirror / "g" / name, "w") as zf:
                zf.writestr("real/x.png", b"png")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(stages, "MANIFEST", manifest)
    outs = tuple(tmp_path / "raw" / n for n in ["a.zip", "b.zip", "c.zip"])
    from types import SimpleNamespace

    config = SimpleNamespace(data=SimpleNamespace(genimage_dir=None))  # no hand-placed directory: the mirror
    stage = Stage(slug="pid", name="download", config=config, scale="paper", data_source="remote",
                  mirror=str(mirror), inputs=(), outputs=outs, trust_unpinned=True)
    with pytest.raises(DownloadError, match="b.zip"):
        stages._download_genimage(stage, None)
    assert not any(p.exists() or record_path(p).exists() for p in outs)


def test_no_manifest_row_uses_plain_http():
    """Issue 36.10: every study's remote file is fetched over https (lfss's STL-10 and Tiny-ImageNet rows were
    plain http protected only by an md5; the same files are served over https)."""
    from icml25.core.download import read_manifest

    root = Path(__file__).resolve().parents[2] / "src/icml25/studies"
    plain = [f"{m.parent.name}:{e.name}" for m in sorted(root.glob("*/manifest.csv"))
             for e in read_manifest(m, rehearsal=False).values() if e.url.startswith("http://")]
    assert plain == []
