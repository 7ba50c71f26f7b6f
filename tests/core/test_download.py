"""core.download against real HTTP on loopback: the data mirror (conftest.MIRROR, ``$ICML25_MIRROR``) served over
HTTP, a directory mirror, and a flaky server that drops connections mid-file (resume with Range)."""
from __future__ import annotations

import hashlib
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from conftest import MIRROR, mirror_skip
from icml25.core.download import (DownloadError, IntegrityError, ManifestEntry, check_recorded, csv_check, fetch,
                                  md5_file, netcdf_check, obtain, parquet_check, read_manifest, record_path,
                                  sha256_file, source_url)

ETT = "zhouhaoyi/ETDataset/ETT-small/ETTh1.csv"
ETT_SHA = "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066"
ETT_URL = ("https://raw.githubusercontent.com/zhouhaoyi/ETDataset/1d16c8f4f943005d613b5bc962e9eeb06058cf07/"
           "ETT-small/ETTh1.csv")

needs_mirror = pytest.mark.skipif(not (MIRROR / ETT).exists(), reason=mirror_skip(f"{ETT} (2.6 MB, CC BY-ND 4.0)"))


def _entry(sha: str = ETT_SHA, size: int | None = 2589657, path: str = ETT) -> ManifestEntry:
    return ManifestEntry("etth1", ETT_URL, sha, size, "CC BY-ND 4.0", path)


@needs_mirror
def test_fetch_over_loopback_http_verifies_and_places_file(tmp_path, http_server):
    base = http_server(MIRROR)
    dest = fetch(_entry(), tmp_path / "raw" / "ETTh1.csv", mirror=base, progress=False)
    assert sha256_file(dest) == ETT_SHA
    assert not list(dest.parent.glob(".*part"))  # no temporary left


@needs_mirror
def test_fetch_from_directory_mirror(tmp_path):
    dest = fetch(_entry(), tmp_path / "ETTh1.csv", mirror=MIRROR, progress=False)
    assert dest.read_bytes() == (MIRROR / ETT).read_bytes()


@needs_mirror
def test_corrupt_file_fails_sha_and_leaves_nothing(tmp_path, http_server):
    bad = tmp_path / "srv" / ETT
    bad.parent.mkdir(parents=True)
    data = bytearray((MIRROR / ETT).read_bytes())
    data[1000] ^= 0xFF  # same size, one flipped byte
    bad.write_bytes(bytes(data))
    base = http_server(tmp_path / "srv")
    dest = tmp_path / "out" / "ETTh1.csv"
    with pytest.raises(DownloadError, match="sha256 mismatch.*expected f18de3ad"):
        fetch(_entry(), dest, mirror=base, progress=False)
    assert not dest.exists() and list((tmp_path / "out").iterdir()) == []


@needs_mirror
def test_truncated_file_fails_and_leaves_nothing(tmp_path, http_server):
    short = tmp_path / "srv" / ETT
    short.parent.mkdir(parents=True)
    short.write_bytes((MIRROR / ETT).read_bytes()[:100_000])
    base = http_server(tmp_path / "srv")
    dest = tmp_path / "out" / "ETTh1.csv"
    with pytest.raises(DownloadError, match="size mismatch"):
        fetch(_entry(), dest, mirror=base, progress=False)
    assert not dest.exists()
    # without a known size the sha256 still catches it
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch(_entry(size=None), dest, mirror=base, progress=False)
    assert list((tmp_path / "out").iterdir()) == []


@needs_mirror
def test_404_names_url_and_leaves_nothing(tmp_path, http_server):
    base = http_server(MIRROR)
    dest = tmp_path / "missing.csv"
    with pytest.raises(DownloadError, match=r"HTTP 404.*|.*404") as err:
        fetch(_entry(path="no/such/file.csv"), dest, mirror=base, progress=False)
    assert "127.0.0.1" in str(err.value)
    assert not dest.exists()


def test_resumes_after_dropped_connection(tmp_path):
    """A server that cuts every response after 64 KiB: fetch resumes with Range requests and verifies."""
    payload = bytes(range(256)) * 2000  # 512 000 bytes
    digest = hashlib.sha256(payload).hexdigest()
    ranges_seen = []

    class Flaky(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            start = 0
            if "Range" in self.headers:
                start = int(self.headers["Range"].split("=")[1].split("-")[0])
                ranges_seen.append(start)
                self.send_response(206)
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(payload) - start))
            self.end_headers()
            self.wfile.write(payload[start:start + 65536])  # then drop the connection
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        entry = ManifestEntry("blob", "https://example.org/blob.bin", digest, len(payload), "", "blob.bin")
        dest = fetch(entry, tmp_path / "blob.bin", mirror=f"http://127.0.0.1:{server.server_port}",
                     retries=10, progress=False)
        assert dest.read_bytes() == payload
        assert ranges_seen[:2] == [65536, 131072]
    finally:
        server.shutdown()


def test_pin_on_first_download_then_enforced(tmp_path):
    src = tmp_path / "mirror" / "data" / "f.bin"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"first version")
    entry = ManifestEntry("f", "https://example.org/data/f.bin", "", None, "", "data/f.bin")
    dest = fetch(entry, tmp_path / "out" / "f.bin", mirror=tmp_path / "mirror", progress=False,
                 trust_unpinned=True)
    pin = dest.with_name("f.bin.sha256")
    assert pin.read_text().strip() == hashlib.sha256(b"first version").hexdigest()
    dest.unlink()
    src.write_bytes(b"changed upstream")
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        fetch(entry, dest, mirror=tmp_path / "mirror", progress=False, trust_unpinned=True)
    assert not dest.exists()


def test_unpinned_entry_refused_without_opt_in_and_logged_with_it(tmp_path, http_server, caplog):
    """Issue 11, finding 5: a row without a sha256 (26-byte text served as a netCDF file) is refused unless the
    caller opts in to trust on first use; the opt-in is logged; the format check still rejects the text."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "ocean_his_20080101.nc").write_text("this is not a netcdf file\n")
    base = http_server(tmp_path / "www")
    entry = ManifestEntry("ocean_his_20080101.nc", "https://example.org/ocean_his_20080101.nc", "", None, "",
                          "ocean_his_20080101.nc")
    dest = tmp_path / "raw" / "ocean_his_20080101.nc"
    with pytest.raises(DownloadError, match=r"pins no sha256 .*refusing it.*trust_unpinned"):
        fetch(entry, dest, base, progress=False)
    assert not dest.exists() and not list(dest.parent.iterdir())
    with pytest.raises(DownloadError, match=r"ocean_his_20080101.nc is not a valid file.*does not open as netCDF"):
        fetch(entry, dest, base, progress=False, trust_unpinned=True, check=netcdf_check(["h", "pm"]))
    assert not list(dest.parent.iterdir())  # no file, no part, no pin
    (tmp_path / "www" / "t.txt").write_text("plain")
    text = ManifestEntry("t", "https://example.org/t.txt", "", None, "", "t.txt")
    with caplog.at_level("WARNING", logger="icml25"):
        fetch(text, tmp_path / "raw" / "t.txt", base, progress=False, trust_unpinned=True)
    assert "trusted on first use" in caplog.text and hashlib.sha256(b"plain").hexdigest() in caplog.text


def test_format_checks_name_what_is_wrong(tmp_path):
    import netCDF4
    import numpy as np
    import pandas as pd

    nc = tmp_path / "a.nc"
    with netCDF4.Dataset(nc, "w") as ds:
        ds.createDimension("x", 3)
        ds.createVariable("h", "f8", ("x",), zlib=True)[:] = np.arange(3.0)
    netcdf_check(["h"])(nc)
    with pytest.raises(ValueError, match=r"\['pm'\] missing"):
        netcdf_check(["h", "pm"])(nc)
    csv_path = tmp_path / "a.csv"
    csv_path.write_text("lwage,educ\n1,2\n")
    csv_check(["lwage", "educ"])(csv_path)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['nearc4'\]"):
        csv_check(["nearc4"])(csv_path)
    csv_path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ValueError, match="not utf-8 text"):
        csv_check(["a"])(csv_path)
    pq = tmp_path / "a.parquet"
    pd.DataFrame({"language": ["en"], "conversation": ["x"]}).to_parquet(pq)
    parquet_check(["language", "conversation"])(pq)
    with pytest.raises(ValueError, match="lacks column"):
        parquet_check(["turn"])(pq)
    with pytest.raises(ValueError, match="not a parquet file"):
        parquet_check(["turn"])(csv_path)


def test_recorded_hash_is_rechecked_by_later_readers(tmp_path):
    """Finding 5/6: every download records its hash; a reader finds a file changed after download."""
    src = tmp_path / "mirror" / "f.bin"
    src.parent.mkdir()
    src.write_bytes(b"payload")
    entry = ManifestEntry("f", "https://example.org/f.bin", hashlib.sha256(b"payload").hexdigest(), 7, "", "f.bin")
    dest = fetch(entry, tmp_path / "raw" / "f.bin", tmp_path / "mirror", progress=False)
    assert check_recorded(dest) == hashlib.sha256(b"payload").hexdigest()
    dest.write_bytes(b"pAyload")
    with pytest.raises(IntegrityError, match=r"f.bin: sha256 .* differs from .* recorded at download"):
        check_recorded(dest)
    dest.with_name("f.bin.sha256").unlink()
    with pytest.raises(IntegrityError, match="no recorded sha256"):
        check_recorded(dest)


def test_shipped_manifests_pin_or_mark_unpinned_explicitly():
    """Finding 5: no manifest row of a study leaves its sha256 empty; rows without one say UNPINNED."""
    import csv

    root = Path(__file__).resolve().parents[2] / "src" / "icml25" / "studies"
    counts = {}
    for manifest in sorted(root.glob("*/manifest.csv")):
        entries = read_manifest(manifest)  # an empty sha256 cell would raise
        with open(manifest, newline="") as fh:
            cells = [r["sha256"] for r in csv.DictReader(fh)]
        assert all(c == "UNPINNED" or len(c) == 64 for c in cells), manifest
        counts[manifest.parent.name] = (sum(c == "UNPINNED" for c in cells), len(entries))
    assert counts["rip"] == (15, 16) and counts["coastalbench"][0] == counts["coastalbench"][1] > 3000
    assert counts["cat_iv"][0] == 0 and counts["human_baselines"][0] == 0


def test_manifest_parsing_errors_name_row_and_column(tmp_path):
    good = "name,url,sha256,size,licence,mirror_path\netth1,%s,%s,10,CC,%s\n" % (ETT_URL, ETT_SHA, ETT)
    path = tmp_path / "manifest.csv"
    path.write_text(good)
    assert read_manifest(path)["etth1"].size == 10
    path.write_text(good.replace("https://", "http://"))  # plain http on a row that pins a sha256: accepted
    assert read_manifest(path)["etth1"].url.startswith("http://")
    path.write_text(good.replace("https://", "http://").replace(ETT_SHA, "UNPINNED"))
    with pytest.raises(ValueError, match=r"manifest.csv:2: column url must be https \(plain http only on a row "
                                         r"that pins a sha256 or an md5\)"):
        read_manifest(path)
    path.write_text(good.replace("https://", "ftp://"))
    with pytest.raises(ValueError, match=r"manifest.csv:2: column url must be https"):
        read_manifest(path)
    path.write_text(good.replace(ETT_SHA, "abc"))
    with pytest.raises(ValueError, match="column sha256"):
        read_manifest(path)
    path.write_text(good.replace(ETT_SHA, ""))
    with pytest.raises(ValueError, match=r"manifest.csv:2: column sha256 is empty.*UNPINNED"):
        read_manifest(path)
    path.write_text(good.replace(ETT_SHA, "UNPINNED"))
    assert read_manifest(path)["etth1"].sha256 == ""
    path.write_text("name,url\nx,https://a\n")
    with pytest.raises(ValueError, match="missing column"):
        read_manifest(path)


def test_source_url_rewrites_to_mirror():
    e = _entry()
    assert source_url(e) == ETT_URL
    assert source_url(e, "http://127.0.0.1:9/base/") == f"http://127.0.0.1:9/base/{ETT}"
    assert source_url(e, "/srv/mirror").endswith(f"/srv/mirror/{ETT}")


@needs_mirror
def test_existing_verified_file_is_kept(tmp_path):
    dest = tmp_path / "ETTh1.csv"
    shutil.copyfile(MIRROR / ETT, dest)
    before = dest.stat().st_mtime_ns
    fetch(_entry(), dest, mirror="http://127.0.0.1:9/unreachable", progress=False)
    assert dest.stat().st_mtime_ns == before


def test_publisher_md5_verifies_first_download_over_http_then_sha256_is_pinned(tmp_path, http_server, caplog):
    """A row with sha256 UNPINNED and the publisher's md5 (CIFAR, STL-10, Tiny-ImageNet) over plain http: the md5
    is checked without any opt-in, the sha256 is pinned, and a later changed file fails that pin."""
    data = b"publisher bytes" * 100
    md5 = hashlib.md5(data).hexdigest()
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "f.bin").write_bytes(data)
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("name,url,sha256,size,licence,mirror_path,md5\n"
                        f"f,http://example.org/f.bin,UNPINNED,{len(data)},research,f.bin,{md5.upper()}\n")
    entry = read_manifest(manifest)["f"]
    assert (entry.sha256, entry.md5) == ("", md5)
    base = http_server(tmp_path / "www")
    dest = tmp_path / "raw" / "f.bin"
    with caplog.at_level("INFO", logger="icml25"):
        fetch(entry, dest, base, progress=False)  # no trust_unpinned needed
    assert "publisher md5" in caplog.text and md5_file(dest) == md5
    assert record_path(dest).read_text().strip() == hashlib.sha256(data).hexdigest()
    assert fetch(entry, dest, "http://127.0.0.1:9/unreachable", progress=False) == dest  # kept, no transfer
    dest.unlink()
    (tmp_path / "www" / "f.bin").write_bytes(data[::-1])  # same size, other bytes
    with pytest.raises(DownloadError, match="sha256 mismatch"):  # the pin now rules
        fetch(entry, dest, base, progress=False)
    assert not dest.exists()
    record_path(dest).unlink()
    with pytest.raises(DownloadError, match=f"md5 mismatch for f: the publisher gives {md5}"):
        fetch(entry, dest, base, progress=False)
    assert sorted(p.name for p in dest.parent.iterdir()) == []
    manifest.write_text(manifest.read_text().replace(md5.upper(), "xyz"))
    with pytest.raises(ValueError, match="manifest.csv:2: column md5 is not an md5"):
        read_manifest(manifest)


def test_obtain_offline_verifies_records_and_leaves_nothing_on_mismatch(tmp_path):
    """The offline branch of obtain: packaged bytes are checked against the manifest, written with their record
    (so check_recorded works as after a download); a wrong package version leaves nothing; remote goes to fetch."""
    data = b"wheel copy"
    sha = hashlib.sha256(data).hexdigest()
    entry = ManifestEntry("w", "https://example.org/w.csv", sha, None, "", "w.csv")
    dest = obtain(entry, tmp_path / "raw" / "w.csv", "offline", lambda: data)
    assert dest.read_bytes() == data and check_recorded(dest) == sha
    other = tmp_path / "raw" / "v.csv"
    with pytest.raises(DownloadError, match=f"w: the packaged copy's sha256 .* differs from the manifest's {sha}"):
        obtain(entry, other, "offline", lambda: b"another version")
    with pytest.raises(DownloadError, match="ships in no installed package"):
        obtain(entry, other, "offline", None)
    with pytest.raises(ValueError, match="data_source: unknown 'cloud'"):
        obtain(entry, other, "cloud", lambda: data)
    assert sorted(p.name for p in other.parent.iterdir()) == ["w.csv", "w.csv.sha256"]
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "w.csv").write_bytes(data)
    assert obtain(entry, other, "remote", None, mirror=tmp_path / "mirror").read_bytes() == data
