"""The tuning record of every study (issue: verdicts a statistician would sign): ``tuning/<slug>.jsonl`` exists, no
record used an evaluation seed of any scale, and the study README's ``## Tuning`` section states how many runs the
record holds."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from icml25.core.tune import evaluation_seeds, read_records
from icml25.studies import STUDIES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("slug", STUDIES)
def test_tuning_record_is_disjoint_from_evaluation_seeds_and_matches_the_readme(slug):
    path = ROOT / "tuning" / f"{slug}.jsonl"
    assert path.is_file(), f"{path.relative_to(ROOT)} missing: every study keeps a tuning record (may be empty)"
    records = read_records(path)
    eval_seeds = evaluation_seeds(yaml.safe_load((ROOT / "config" / "studies" / f"{slug}.yaml").read_text()))
    every = set().union(*map(set, eval_seeds.values()))
    for i, rec in enumerate(records, 1):
        assert rec.get("study", slug) == slug, f"{path.name}:{i}: record of another study"
        clash = set(int(s) for s in rec["seeds"]) & every
        assert not clash, f"{path.name}:{i}: tuning seeds {sorted(clash)} are evaluation seeds of {slug}"
    readme = (ROOT / "src" / "icml25" / "studies" / slug / "README.md").read_text()
    m = re.search(r"^## Tuning\b(.*?)(?=^## |\Z)", readme, flags=re.S | re.M)
    assert m, f"{slug} README has no '## Tuning' section"
    stated = re.search(rf"tuning/{slug}\.jsonl`? holds (\d+) runs?", m.group(1))
    assert stated, f"{slug} README's Tuning section must say 'tuning/{slug}.jsonl holds N runs'"
    assert int(stated.group(1)) == len(records), (
        f"{slug} README says {stated.group(1)} tuning runs, tuning/{slug}.jsonl holds {len(records)}")
