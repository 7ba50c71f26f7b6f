"""The contract of DESIGN.md: every implemented study has all its pieces, named by its slug."""
from __future__ import annotations

import importlib
import os
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from icml25.studies import ALL_SLUGS, STUDIES

ROOT = Path(__file__).resolve().parents[1]
#: The study specifications the studies were built from (one ``<slug>.md`` per study, with a "## Public API"
#: section). They are development material kept outside the project (``../shared/specs`` beside the checkout
#: for the project's CI and check tools, or ``$ICML25_SPECS``); without them the API check skips.
SPECS = Path(os.environ.get("ICML25_SPECS") or ROOT.parent / "shared" / "specs")
STAGE_RULES = ("preprocess", "train", "evaluate", "all")


def spec_api_names(slug: str) -> list[str]:
    """Names of the spec's '## Public API' section: first backticked identifier of each bullet, plus imports."""
    text = (SPECS / f"{slug}.md").read_text()
    section = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    names: list[str] = []
    for line in section.splitlines():
        m = re.search(r"from icml25\.studies\.\w+ import ([\w, ]+)", line)
        if m:
            names += [n.strip() for n in m.group(1).split(",")]
        if line.lstrip().startswith("- "):  # the bullet's first name, and names listed after "; "
            names += re.findall(r"^\s*- (?:\w+: )?`([A-Za-z_]\w*)[(.]", line)
            # a bare `name` opens an API bullet only at the top level (a sub-bullet names an argument)
            names += re.findall(r"^- (?:\w+: )?`([A-Za-z_]\w*)`", line)
            # "; `name(...)`" lists another API name, but "; `name(x)` = ..." defines an argument (a callback)
            names += [n for n, eq in re.findall(r"; `([A-Za-z_]\w*)[(.][^`]*`(\s*=)?", line) if not eq]
    return [n for n in dict.fromkeys(names) if not n.startswith("icml25") and n[0].isalpha()
            and n not in ("np", "pd", "torch", "scores", "F", "xr", "ds")]


def test_studies_are_known_slugs():
    assert STUDIES and set(STUDIES) <= set(ALL_SLUGS) and len(ALL_SLUGS) == 19


@pytest.mark.parametrize("slug", STUDIES)
def test_study_has_every_piece(slug):
    pkg = ROOT / "src" / "icml25" / "studies" / slug
    for name in ("__init__.py", "__main__.py", "config.py", "README.md"):
        assert (pkg / name).is_file(), f"{slug}: missing {name}"
    assert (ROOT / "config" / "studies" / f"{slug}.yaml").is_file()
    assert (ROOT / "tests" / "studies" / f"test_{slug}.py").is_file()
    smk = ROOT / "workflow" / "rules" / f"{slug}.smk"
    assert f'include: "workflow/rules/{slug}.smk"' in (ROOT / "Snakefile").read_text()
    rules = set(re.findall(r"^rule (\w+):", smk.read_text(), flags=re.M))
    assert all(r.startswith(f"{slug}__") for r in rules), rules
    assert {f"{slug}__download", f"{slug}__prepare"} & rules, f"{slug}: needs a download or prepare rule"
    for stage in STAGE_RULES:
        assert f"{slug}__{stage}" in rules, f"{slug}: missing rule {slug}__{stage}"
    assert importlib.import_module(f"icml25.studies.{slug}.config").Config


@pytest.mark.parametrize("slug", STUDIES)
def test_every_rule_declares_log_benchmark_conda_resources_threads(slug):
    text = (ROOT / "workflow" / "rules" / f"{slug}.smk").read_text()
    blocks = re.split(r"^rule ", text, flags=re.M)[1:]
    for block in blocks:
        name = block.split(":", 1)[0]
        if name.endswith("__all"):
            continue
        for directive in ("input:", "output:", "log:", "benchmark:", "conda:", "resources:", "threads:"):
            if directive == "input:" and ("__download" in name or "__prepare" in name):
                continue
            assert f"    {directive}" in block, f"rule {name}: missing {directive}"
        env = re.search(r'conda:\s+"\.\./\.\./(envs/[\w.-]+\.yaml)"', block)
        assert env and (ROOT / env.group(1)).is_file(), f"rule {name}: conda env missing"


@pytest.mark.parametrize("slug", STUDIES)
def test_every_rule_passes_its_stage_keys_and_every_stage_declares_them(slug):
    """Each <slug>__<stage> rule's params are `**stage_params(slug, "<stage>")` (its own stage, nothing else
    carrying config), each such stage has a STAGE_KEYS entry naming keys of the model, and the stage CLI knows
    every declared stage."""
    from icml25.core.config import check_stage_keys
    from icml25.studies import study_config_class, study_stage_keys

    keys = study_stage_keys(slug)
    check_stage_keys(study_config_class(slug), keys)
    text = (ROOT / "workflow" / "rules" / f"{slug}.smk").read_text()
    for block in re.split(r"^\s*rule ", text, flags=re.M)[1:]:
        name = block.split(":", 1)[0]
        if name.endswith("__all"):
            continue
        stage = name.split("__", 1)[1].removeprefix("branch_")  # lfss: a data-set branch's copy of the stage rule
        if stage not in keys:  # a variant rule of a stage (ntk_dfl__train_extra: the extra data sets' train jobs)
            stage = next((s for s in keys if stage.startswith(s + "_")), stage)
        assert stage in keys, f"rule {name}: stage {stage!r} has no STAGE_KEYS entry"
        params = re.findall(r"stage_params\(([^)]*)\)", block)
        assert len(params) == 1 and params[0].endswith(f'"{stage}"'), f"rule {name}: params {params}"
        assert "cfg(" not in block.split("shell:", 1)[0].split("params:", 1)[-1], f"rule {name}: whole config in params"
    pkg = ROOT / "src" / "icml25" / "studies" / slug
    source = next(t for t in ((pkg / f).read_text() for f in ("stages.py", "__main__.py")) if "\nSTAGES = " in t)
    table = source.split("\nSTAGES = ", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r'"(\w+)"', table)) == set(keys), f"{slug}: STAGES and STAGE_KEYS differ"


@pytest.mark.parametrize("slug", STUDIES)
def test_public_api_of_spec_exists(slug):
    if not SPECS.exists():
        pytest.skip(f"needs the study specifications (<slug>.md with a '## Public API' section, development "
                    f"material outside the project), not found at {SPECS}: set ICML25_SPECS=<dir> (default "
                    "../shared/specs beside the checkout)")
    module = importlib.import_module(f"icml25.studies.{slug}")
    missing = [n for n in spec_api_names(slug) if not hasattr(module, n)]
    assert not missing, f"{slug}: spec'd public API missing: {missing}"


def test_study_never_imports_another_study():
    for slug in STUDIES:
        for path in (ROOT / "src" / "icml25" / "studies" / slug).rglob("*.py"):
            others = re.findall(r"icml25\.studies\.(\w+)", path.read_text())
            assert set(others) <= {slug}, f"{path} imports {set(others) - {slug}}"


def test_conda_envs_in_step_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = project["dependencies"]
    extras = project["optional-dependencies"]
    envs = sorted((ROOT / "envs").glob("*.yaml"))
    assert envs
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
        name = env.stem  # envs/<extra>.yaml = core + that extra (core.yaml: core alone)
        expected = core + extras.get(name, [])
        assert sorted(pip) == sorted(expected), f"{env.name} differs from pyproject (core + extra {name!r})"
