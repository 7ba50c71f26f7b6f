"""Issue 36.5: GenImage unpack caps declared sizes and compression ratios: a bomb is refused naming the member,
before anything is extracted (at download by archive_check, at unpack again)."""
from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from icml25.core.download import write_record
from icml25.studies.pid import genimage
from icml25.studies.pid.genimage import ArchiveError, archive_check, unpack


def _zip_bomb(path, mb: int = 24):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sdv14/train/nature/ok.png", b"\x89PNG" + bytes(range(256)) * 40)
        zf.writestr("sdv14/train/ai/bomb.png", bytes(mb << 20))


def test_a_zip_bomb_is_refused_naming_the_member(tmp_path):
    bomb = tmp_path / "sdv14.zip"
    _zip_bomb(bomb)
    assert bomb.stat().st_size < 200_000  # ~24 KB on disk, 24 MB declared
    with pytest.raises(ArchiveError, match=r"sdv14.zip: member 'sdv14/train/ai/bomb.png' declares 25165824 bytes"):
        archive_check(bomb)
    write_record(bomb)
    target = tmp_path / "unpacked" / "sdv14"
    with pytest.raises(ArchiveError, match="bomb.png"):
        unpack(bomb, target)
    assert not target.exists() and not list((tmp_path / "unpacked").glob(".*"))


def test_a_tar_bomb_is_refused_by_the_total_ratio(tmp_path):
    bomb = tmp_path / "adm.tar.gz"
    with tarfile.open(bomb, "w:gz") as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"adm/train/ai/{i}.png")
            info.size = 48 << 20
            tar.addfile(info, io.BytesIO(bytes(info.size)))
    assert bomb.stat().st_size < 1_000_000
    with pytest.raises(ArchiveError, match=r"adm.tar.gz: the members up to 'adm/train/ai/\d.png' declare"):
        archive_check(bomb)


def test_a_member_over_the_size_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(genimage, "MAX_MEMBER_BYTES", 1000)
    arc = tmp_path / "glide.zip"
    with zipfile.ZipFile(arc, "w") as zf:  # stored: ratio 1, only the size cap applies
        zf.writestr("glide/val/ai/big.png", bytes(range(256)) * 8)
    with pytest.raises(ArchiveError, match=r"member 'glide/val/ai/big.png' declares 2048 bytes, more than the cap"):
        archive_check(arc)


def test_an_ordinary_archive_still_unpacks(tmp_path):
    arc = tmp_path / "vqdm.zip"
    with zipfile.ZipFile(arc, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("vqdm/val/nature/a.png", bytes(range(256)) * 50)
    write_record(arc)
    assert unpack(arc, tmp_path / "out")["files"] == 1
