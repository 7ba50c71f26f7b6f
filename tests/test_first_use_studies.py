"""Issue 36.2 per study: an UNPINNED row is pinned on first use only after a format *and* size check of the whole
file, so a truncated download (kernel_adaptation's ARFF cut to 23 of 40 rows, coalition_attribution's gzip,
magnets' tar.gz) is refused with nothing pinned, and the whole file is then accepted."""
from __future__ import annotations

import gzip
import io
import tarfile
from types import SimpleNamespace

import pytest

from icml25.core.cli import Stage
from icml25.core.download import DownloadError, record_path


class _Run:
    def __getattr__(self, name):
        return lambda *a, **k: None


def _stage(slug, config, mirror, outputs, name="download"):
    return Stage(slug=slug, name=name, config=config, scale="paper", data_source="remote", mirror=str(mirror),
                 inputs=(), outputs=tuple(outputs), trust_unpinned=True)


def _arff(rows: int) -> bytes:
    head = "@relation mnist_784\n" + "".join(f"@attribute pixel{i} numeric\n" for i in range(784))
    body = "".join(",".join(["0"] * 784 + [str(r % 10)]) + "\n" for r in range(rows))
    return (head + "@attribute class {0,1,2,3,4,5,6,7,8,9}\n@data\n" + body).encode()


def test_kernel_adaptation_refuses_to_pin_an_arff_cut_at_a_row_boundary(tmp_path, monkeypatch):
    """The ARFF row is pinned now (issue 35: the sha256 and size published for OpenML file 52667), so the test
    unpins it to exercise the first-use path a re-hosted or re-released file would take."""
    import dataclasses

    from icml25.core.download import read_manifest
    from icml25.studies.kernel_adaptation import MANIFEST
    from icml25.studies.kernel_adaptation import data as D
    from icml25.studies.kernel_adaptation import stages

    manifest = {k: dataclasses.replace(e, sha256="", size=None) for k, e in read_manifest(MANIFEST).items()}
    monkeypatch.setattr(stages, "read_manifest", lambda path, **kw: manifest)
    monkeypatch.setattr(D, "MNIST784_ROWS", 40)  # the real file has 70,000; a 40-row miniature here
    mirror = tmp_path / "mirror" / "openml"
    mirror.mkdir(parents=True)
    full = _arff(40)
    (mirror / "mnist_784.arff").write_bytes(full[: len(full) - 17 * 1570])  # 23 whole rows of 40
    outs = [tmp_path / "raw/sources.json", tmp_path / "raw/mnist_784.arff"]
    stage = _stage("kernel_adaptation", SimpleNamespace(tasks=("mnist03",)), tmp_path / "mirror", outs)
    with pytest.raises(DownloadError, match=r"mnist_784_arff is not a valid file.*@data rows, expected 40"):
        stages.download(stage, _Run())
    assert not outs[1].exists() and not record_path(outs[1]).exists()
    (mirror / "mnist_784.arff").write_bytes(full)
    stages.download(stage, _Run())
    assert outs[1].read_bytes() == full and record_path(outs[1]).exists()


def _idx_gz() -> bytes:
    return gzip.compress(b"\x00\x00\x08\x01\x00\x00\x00\x05" + bytes(range(5)) * 200)


def test_coalition_attribution_refuses_to_pin_a_truncated_gzip(tmp_path, monkeypatch):
    """The first-use gzip check of an unpinned row, and no orphan pins when file 3 of 4 fails. The MNIST rows are
    pinned now (issue 34: copied from ntk_dfl's manifest), so the test unpins them to exercise the first-use path
    a re-hosted or re-released file would take."""
    import dataclasses

    from icml25.core.download import read_manifest
    from icml25.studies.coalition_attribution import MANIFEST, stages

    manifest = {k: dataclasses.replace(e, sha256="", size=None, md5="")
                for k, e in read_manifest(MANIFEST).items()}
    monkeypatch.setattr(stages, "read_manifest", lambda path, **kw: manifest)
    names = ["mnist_test_images", "mnist_test_labels", "mnist_train_images", "mnist_train_labels"]
    mirror = tmp_path / "mirror"
    for i, name in enumerate(names):
        path = mirror / manifest[name].mirror_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_idx_gz()[:-10] if i == 2 else _idx_gz())
    outs = [tmp_path / "raw/sources.json", *[tmp_path / "raw" / n for n in names]]
    stage = _stage("coalition_attribution", SimpleNamespace(real=SimpleNamespace(experiments=("mnist_vgg11",))),
                   mirror, outs)
    with pytest.raises(DownloadError, match="mnist_train_images is not a valid file.*gzip"):
        stages.download(stage, _Run())
    assert not any(p.exists() or record_path(p).exists() for p in outs[1:])  # no orphan pins of files 1-2
    (mirror / manifest["mnist_train_images"].mirror_path).write_bytes(_idx_gz())
    stages.download(stage, _Run())
    assert all(record_path(p).exists() for p in outs[1:])


def test_magnets_refuses_to_pin_a_truncated_or_html_tarball(tmp_path, monkeypatch):
    from icml25.studies.magnets import stages

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        payload = bytes(range(256)) * 64
        info = tarfile.TarInfo("val/x.JPEG")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    good = buf.getvalue()
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "val.tar.gz").write_bytes(good[: len(good) - 100])
    (mirror / "list.txt").write_text("<!DOCTYPE html><html>Access denied</html>\n")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("name,url,sha256,size,licence,mirror_path\n"
                        "imagenet_val,https://example.org/val.tar.gz,UNPINNED,,t,val.tar.gz\n"
                        "kinetics600_val_list,https://example.org/list.txt,UNPINNED,,t,list.txt\n")
    monkeypatch.setattr(stages, "MANIFEST", manifest)
    outs = [tmp_path / "raw/val.tar.gz", tmp_path / "raw/list.txt"]
    stage = _stage("magnets", SimpleNamespace(data="paper"), mirror, outs, name="prepare")
    with pytest.raises(DownloadError, match="imagenet_val is not a valid file.*tar"):
        stages.prepare(stage, _Run())
    assert not any(p.exists() or record_path(p).exists() for p in outs)
    (mirror / "val.tar.gz").write_bytes(good)
    with pytest.raises(DownloadError, match="kinetics600_val_list is not a valid file.*HTML"):
        stages.prepare(stage, _Run())
    assert not any(p.exists() or record_path(p).exists() for p in outs)  # file 1 and its pin removed too
