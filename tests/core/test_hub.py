"""icml25.core.hub: model manifests validate, pinned rows load at their commit, unpinned rows need the opt-in and
record the commit they resolved, local directories get a content digest, claims.json carries the models block."""
from __future__ import annotations

import hashlib

import pytest

from icml25.core import hub
from icml25.core.claims import Evidence, check, load_claims, write_claims

C1 = "0123456789abcdef0123456789abcdef01234567"
C2 = "89abcdef0123456789abcdef0123456789abcdef"


def _write(tmp_path, body: str):
    p = tmp_path / "models.csv"
    p.write_text("name,repo_id,revision,licence\n" + body)
    return p


def test_read_models_rows(tmp_path):
    p = _write(tmp_path, f"policy,meta-llama/Llama-3.1-8B-Instruct,{C1},Llama 3.1\njudge,org/judge,UNPINNED,MIT\n")
    rows = hub.read_models(p)
    assert list(rows) == ["policy", "judge"]
    assert rows["policy"] == hub.HubModel("policy", "meta-llama/Llama-3.1-8B-Instruct", C1, "Llama 3.1")
    assert rows["policy"].pinned and not rows["judge"].pinned


@pytest.mark.parametrize("body, where", [
    (f"Policy,org/m,{C1},MIT\n", "line 2: column name"),
    (f"a,org/m,{C1},MIT\na,org/n,{C1},MIT\n", "line 3: column name"),
    (f"a,not a repo,{C1},MIT\n", "line 2: column repo_id"),
    ("a,org/m,main,MIT\n", "line 2: column revision"),
    (f"a,org/m,{C1[:12]},MIT\n", "line 2: column revision"),
    (f"a,org/m,{C1},\n", "line 2: column licence"),
])
def test_read_models_errors_name_line_and_column(tmp_path, body, where):
    with pytest.raises(hub.HubError, match=where):
        hub.read_models(_write(tmp_path, body))


def test_read_models_missing_file_and_column(tmp_path):
    with pytest.raises(hub.HubError, match="model manifest missing"):
        hub.read_models(tmp_path / "nope.csv")
    p = tmp_path / "m.csv"
    p.write_text("name,repo_id,licence\na,org/m,MIT\n")
    with pytest.raises(hub.HubError, match=r"\['revision'\] missing"):
        hub.read_models(p)


def test_pinned_loads_at_its_commit_without_remote_code():
    m = hub.resolve(hub.HubModel("a", "org/m", C1, "MIT"), commit_of=lambda r: pytest.fail("no network call"))
    assert (m.path, m.revision, m.source) == ("org/m", C1, "pinned")
    assert m.kwargs() == {"revision": C1, "trust_remote_code": False}


def test_unpinned_needs_the_opt_in_and_records_the_commit_it_resolved():
    row = hub.HubModel("judge", "org/judge", hub.UNPINNED, "MIT")
    calls = []
    with pytest.raises(hub.HubError, match="trust_unpinned=true"):
        hub.resolve(row, commit_of=lambda r: calls.append(r) or C2)
    assert calls == []  # refused before any network call
    m = hub.resolve(row, trust_unpinned=True, commit_of=lambda r: calls.append(r) or C2)
    assert calls == ["org/judge"] and (m.revision, m.source) == (C2, "resolved")
    assert m.kwargs()["revision"] == C2
    with pytest.raises(hub.HubError, match="not a commit"):
        hub.resolve(row, trust_unpinned=True, commit_of=lambda r: "main")


def test_local_directory_digest_is_over_names_and_bytes(tmp_path):
    d = tmp_path / "tiny"
    (d / "sub").mkdir(parents=True)
    (d / "config.json").write_bytes(b"{}")
    (d / "sub" / "w.bin").write_bytes(b"\x00\x01")
    expected = hashlib.sha256(b"config.json\0{}\0" + b"sub/w.bin\0\x00\x01\0").hexdigest()
    m = hub.resolve(hub.HubModel("a", "org/m", hub.UNPINNED, "MIT"), local_dir=d)
    assert (m.path, m.revision, m.source) == (str(d), f"local:{expected}", "local")
    assert m.kwargs() == {"trust_remote_code": False}
    (d / "sub" / "w.bin").write_bytes(b"\x00\x02")
    assert hub.resolve(hub.HubModel("a", "org/m", C1, "MIT"), local_dir=d).revision != m.revision
    with pytest.raises(hub.HubError, match="does not exist"):
        hub.resolve(hub.HubModel("a", "org/m", C1, "MIT"), local_dir=tmp_path / "gone")


class _Run:
    def __init__(self):
        self.params = {}

    def log_params(self, p):
        self.params.update(p)


def test_record_logs_params_and_claims_carry_the_models(tmp_path):
    run = _Run()
    models = hub.record(run, [hub.ResolvedModel("policy", "org/p", "org/p", C1, "pinned"),
                              hub.ResolvedModel("judge", "org/j", "org/j", C2, "resolved")])
    assert run.params == {"hub/policy/repo_id": "org/p", "hub/policy/revision": C1, "hub/policy/source": "pinned",
                          "hub/judge/repo_id": "org/j", "hub/judge/revision": C2, "hub/judge/source": "resolved"}
    c = check("k1", "x holds", holds=True, data="synthetic", test="exact", threshold="== 0",
              statistic={"value": 0.0}, evidence=Evidence(1, "case", None, "exact"))
    write_claims(tmp_path / "claims.json", study="s", scale="paper", data_source="remote", claims=[c],
                 models=models)
    assert load_claims(tmp_path / "claims.json")["models"] == models
    with pytest.raises(hub.HubError, match=r"models.judge: \['revision'\] missing"):
        write_claims(tmp_path / "bad.json", study="s", scale="paper", data_source="remote", claims=[c],
                     models={"judge": {"repo_id": "org/j", "source": "resolved"}})


def test_model_by_repo_finds_the_row_and_applies_a_commit(tmp_path):
    p = _write(tmp_path, f"policy,org/p,{C1},MIT\njudge,org/j,UNPINNED,MIT\n")
    assert hub.model_by_repo(p, "org/j") == hub.HubModel("judge", "org/j", hub.UNPINNED, "MIT")
    assert hub.model_by_repo(p, "org/j", C2).revision == C2
    with pytest.raises(hub.HubError, match=r"models.csv: text model 'org/x' is not one of \['org/j', 'org/p'\]"):
        hub.model_by_repo(p, "org/x", what="text model")
    with pytest.raises(hub.HubError, match="paper.revision: 'main' of model 'org/p' is not a 40-hex commit"):
        hub.model_by_repo(p, "org/p", "main", revision_key="paper.revision")


def test_require_listed_names_the_key_the_manifest_and_where_local_weights_go(tmp_path):
    p = _write(tmp_path, f"policy,org/p,{C1},MIT\njudge,org/j,UNPINNED,MIT\n")
    hub.require_listed(p, "org/j", key="model", local_key="local_dir")  # listed: no error
    where = f"{tmp_path.name}/models.csv"
    with pytest.raises(ValueError, match=rf"^paper.model: 'org/x' is not a repo_id of {where} \['org/j', 'org/p'\] "
                                         r"\(a local directory goes in paper.local_dir\)$"):
        hub.require_listed(p, "org/x", key="paper.model", local_key="paper.local_dir")


def test_study_configs_refuse_a_model_missing_from_their_manifest():
    from pydantic import ValidationError

    from icml25.studies.coalition_attribution.config import TextModel
    from icml25.studies.roste.config import PaperSection

    with pytest.raises(ValidationError, match=r"model: 'org/x' is not a repo_id of coalition_attribution/models.csv"):
        TextModel(model="org/x")
    with pytest.raises(ValidationError, match=r"paper.model: 'org/x' is not a repo_id of roste/models.csv"):
        PaperSection(model="org/x")
