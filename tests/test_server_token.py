"""Issue 36.6: the pipeline's own loopback MLflow server accepts only requests with its per-run bearer token, so
another user of a shared login node cannot read or write the store; the jobs' REST client and MLflow's own
client, given the token through MLFLOW_TRACKING_TOKEN, keep working."""
from __future__ import annotations

import os
import urllib.error
import urllib.request

import pytest

from icml25.core import server as srv
from icml25.core import workflow as wf
from icml25.core.mlflow_rest import RestError, RestTracking
from icml25.core.server_auth import authorized, token_digest


def _status(url: str, token: str | None = None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def test_authorized_compares_the_bearer_token_with_the_digest():
    d = token_digest("s3cret")
    assert authorized([(b"authorization", b"Bearer s3cret")], d)
    assert not authorized([(b"authorization", b"Bearer s3cre")], d)
    assert not authorized([(b"authorization", b"Basic czNjcmV0")], d)
    assert not authorized([], d)


def test_the_pipelines_local_server_requires_its_token(tmp_path, monkeypatch):
    assert srv.token_app_installed(), "pip install -e . registers the mlflow.app entry point icml25-token"
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
    for var in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    started = wf.start_local_server(tmp_path, store, timeout=120)
    assert started is not None, (tmp_path / "logs" / "mlflow-server.log").read_text()[-3000:]
    url, pgid = started
    try:
        token = os.environ["MLFLOW_TRACKING_TOKEN"]
        assert len(token) >= 40
        search = f"{url}/api/2.0/mlflow/experiments/search?max_results=5"
        assert _status(f"{url}/health") == 200
        assert _status(search) == 401  # another user, without the token
        assert _status(search, "wrong-token") == 401
        assert _status(search, token) == 200
        # the jobs' stdlib REST client sends MLFLOW_TRACKING_TOKEN
        rest = RestTracking(url, retries=0)
        exp = rest.experiment_id("token_check")
        run = rest.create_run(exp, "r", {"k": "v"})
        assert run
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "wrong-token")
        with pytest.raises(RestError) as err:
            RestTracking(url, retries=0).experiment_id("token_check")
        assert err.value.status == 401
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
        from mlflow.tracking import MlflowClient

        assert "token_check" in {e.name for e in MlflowClient(url).search_experiments()}
    finally:
        wf.stop_local_server(pgid)
        monkeypatch.delenv("MLFLOW_TRACKING_TOKEN", raising=False)
