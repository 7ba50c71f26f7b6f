"""The UIs a user looks at, seen through headless Chromium: ``mlflow ui`` on a finished smoke run (the study
experiments' runs pages and a run's metric chart; a study's page in MLflow's own terms: the paper in the experiment's
description, the Dataset, Source and Models columns, the Datasets filter, the Models tab; the summary run's claims
table) and Snakemake's ``results/report.html``.

Screenshots go to ``$ICML25_SCREENSHOTS`` (docs/img/ holds the ones shown in docs/slurm.md) or a temp dir.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import free_port, job_runs, mlflow_runs, run_snakemake, tail
from icml25.core.tracking import UI_QUERY
from icml25.studies import STUDIES

pytestmark = [pytest.mark.browser, pytest.mark.slow]

VIEWPORT = {"width": 1500, "height": 800}


def _chromium() -> str | None:
    for name in (os.environ.get("ICML25_CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium driven by playwright (no browser download: ``executable_path``)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (see .ci/services.sh)")
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium binary (apt-get install chromium; see .ci/services.sh)")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = Path(os.environ.get("ICML25_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def mlflow_ui(smoke_run, tmp_path_factory):
    """``mlflow ui`` on the smoke run's store, as a user starts it (job execution off), own process group."""
    from icml25.core.server import server_env, stop, wait_ready

    port = free_port()
    log = tmp_path_factory.mktemp("ui") / "mlflow-ui.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            ["mlflow", "ui", "--backend-store-uri", f"sqlite:///{smoke_run / 'results' / 'mlflow.db'}",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=smoke_run, env=server_env(), stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}", 120, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc.pid)


@pytest.fixture(scope="module")
def store(smoke_run):
    """{experiment name: (experiment id, [runs])} of the smoke run's store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run / 'results' / 'mlflow.db'}")
    runs = mlflow_runs(client.tracking_uri)
    return {name: (client.get_experiment_by_name(name).experiment_id, rs) for name, rs in runs.items()}


def _page(browser, height: int | None = None):
    page = browser.new_page(viewport={**VIEWPORT, "height": height or VIEWPORT["height"]})
    page.set_default_timeout(60_000)
    return page


def _classic_layout(page) -> None:
    """Switch MLflow 3's sidebar from GenAI to 'Model training' and close the assistant panel, if shown."""
    toggle = page.get_by_text("Model training", exact=True)
    if toggle.count():
        toggle.first.click()
    close = page.get_by_role("button", name="Close", exact=True)
    if close.count():
        close.first.click()


NAME_CELLS = "[role=gridcell][col-id*='Run Name']"
PLUS = "M7.25 7.25V4.5"  # the path of the '+' (collapsed) icon of a parent run's expander


def _expand_all(page, rounds: int = 10) -> None:
    """Click every collapsed parent-run expander until no run is hidden."""
    for _ in range(rounds):
        collapsed = [b for b in page.locator(f"{NAME_CELLS} button").all()
                     if PLUS in (b.locator("path").first.get_attribute("d") or "")]
        if not collapsed:
            return
        for button in collapsed:
            button.click()
        page.wait_for_timeout(300)


@pytest.mark.parametrize("slug", STUDIES)
def test_runs_page_lists_the_study_runs(slug, browser, mlflow_ui, store, shots):
    exp_id, runs = store[f"icml25/{slug}"]
    expected = sorted(r.info.run_name for r in runs)
    assert any(name.startswith("pipeline/") for name in expected)  # the invocation's parent run
    page = _page(browser, height=max(VIEWPORT["height"], 260 + 34 * len(expected)))  # no virtualised rows
    try:
        page.goto(f"{mlflow_ui}/#/experiments/{exp_id}/runs{UI_QUERY}")  # the link the docs give
        page.get_by_text("pipeline/").first.wait_for()
        # MLflow 3.17 opens an experiment in its GenAI view (Overview, Judges, "Evaluation runs") unless the URL or
        # the browser's last choice says model training; our links say so: the training view, no switching
        training_view = page.get_by_text("Model registry", exact=True).count() >= 1
        genai_view = page.get_by_text("Judges", exact=True).count()
        _classic_layout(page)
        page.get_by_text(f"{len(expected)} matching runs").wait_for()
        _expand_all(page)  # stage runs are children of the invocation's parent run (some have children too)
        shown = page.locator(NAME_CELLS).all_inner_texts()
        names = sorted(text.strip().splitlines()[-1] for text in shown)
        page.screenshot(path=str(shots / f"mlflow_runs_{slug}.png"))
    finally:
        page.close()
    assert names == expected
    assert training_view and not genai_view


def test_experiments_list_shows_no_default_experiment(browser, mlflow_ui, store, shots):
    """The experiments page lists the study experiments and not MLflow's empty ``Default`` (trashed at set-up)."""
    page = _page(browser)
    try:
        page.goto(f"{mlflow_ui}/#/experiments{UI_QUERY}")
        page.get_by_text(f"icml25/{STUDIES[0]}").first.wait_for()
        names = [n for n in store if page.get_by_text(n, exact=True).count()]
        default = page.get_by_text("Default", exact=True).count()
        page.screenshot(path=str(shots / "mlflow_experiments.png"))
    finally:
        page.close()
    assert sorted(names) == sorted(store) and default == 0


def _longest_metric(uri: str, store) -> tuple[str, str, str, int]:
    """(experiment id, run id, metric key, points) of the stage metric with the longest history."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    cands = [(len(client.get_metric_history(run.info.run_id, key)), exp_id, run.info.run_id, key)
             for name, (exp_id, runs) in sorted(store.items())
             for run in job_runs({name: runs})[name] for key in sorted(run.data.metrics)
             if not key.startswith("job/")]
    assert cands, "no stage metrics in the smoke run's store"
    points, exp_id, run_id, key = max(cands, key=lambda c: c[0])  # first of the longest
    return exp_id, run_id, key, points


def test_metric_chart_renders(browser, mlflow_ui, smoke_run, store, shots):
    exp_id, run_id, key, points = _longest_metric(f"sqlite:///{smoke_run / 'results' / 'mlflow.db'}", store)
    page = _page(browser)
    try:
        page.goto(f"{mlflow_ui}/#/experiments/{exp_id}/runs/{run_id}/model-metrics{UI_QUERY}")
        search = page.get_by_placeholder("Search metric charts")  # charts off screen are not rendered
        search.wait_for()
        search.fill(key)
        card = page.locator("[data-testid=experiment-view-compare-runs-card]", has_text=f"({key})").first
        card.locator(".js-plotly-plot g.trace").first.wait_for()
        traces = card.locator(".js-plotly-plot g.trace").count()
        drawn = card.locator(".js-plotly-plot g.trace path").evaluate_all(
            "els => els.filter(e => (e.getAttribute('d') || '').length > 2).length")
        card.screenshot(path=str(shots / "mlflow_metric_chart.png"))
        page.screenshot(path=str(shots / "mlflow_run_metrics.png"))
    finally:
        page.close()
    assert traces >= 1 and drawn >= 1, (key, points, traces, drawn)


@pytest.fixture(scope="module")
def report_html(smoke_run) -> Path:
    """``snakemake --report results/report.html`` of the finished smoke run."""
    out = run_snakemake(smoke_run, "--config", "scale=smoke", "--report", "results/report.html", timeout=600)
    assert out.returncode == 0, tail(out)
    return smoke_run / "results" / "report.html"


def test_report_html_shows_each_study_and_its_figures(browser, report_html, shots):
    page = _page(browser)
    try:
        page.goto(report_html.as_uri())
        page.get_by_text(re.compile(r"^results$", re.I)).first.wait_for()  # the nav's section heading
        dag = page.locator("canvas, svg.marks").count()  # the workflow graph (vega)
        for slug in STUDIES:
            assert page.get_by_text(slug, exact=True).count() >= 1, f"{slug} missing from the report's results"
        page.get_by_text(STUDIES[0], exact=True).first.click()
        page.locator("a[iconname=eye]").first.click()
        page.locator("img[src^='data:image/png']").first.wait_for()
        width = page.locator("img[src^='data:image/png']").first.evaluate("img => img.naturalWidth")
        page.screenshot(path=str(shots / "snakemake_report.png"))
    finally:
        page.close()
    assert dag >= 1
    assert width > 100  # a real figure, decoded


# -- MLflow as its users know it (issue 40) -----------------------------------------------------------------------

UI_STUDY = "cat_iv"  # download -> preprocess (manifest files) -> train (models) -> evaluate; in every smoke run
COLUMN = "[col-id='attributes.`{}`']"


def _job(runs, stage: str):
    return sorted((r for r in runs if r.data.tags.get("stage") == stage and r.data.tags.get("run_level") == "job"),
                  key=lambda r: r.info.run_name)[0]


def _row_cell(page, run_name: str, column: str):
    """The ``column`` cell of the runs-table row whose Run Name is ``run_name`` (AG Grid splits a row between its
    pinned and centre containers; ``row-index`` ties them)."""
    cells = page.locator(NAME_CELLS).all()
    [cell] = [c for c in cells if c.inner_text().strip().splitlines()[-1:] == [run_name]]
    index = cell.evaluate("e => e.closest('[row-index]').getAttribute('row-index')")
    return page.locator(f".ag-row[row-index='{index}'] {COLUMN.format(column)}").first


def test_study_page_shows_paper_datasets_models_and_source(browser, mlflow_ui, smoke_run, store, shots):
    """The experiment page names the paper (its description); a train run's Dataset and Models cells are filled;
    the Source column shows the commit; the Datasets filter lists the study's data; the Models tab lists the
    trained models. The screenshot is the README's ``docs/img/mlflow_runs.png``."""
    from mlflow.tracking import MlflowClient

    exp_id, runs = store[f"icml25/{UI_STUDY}"]
    paper = json.loads((smoke_run / "results" / "smoke" / UI_STUDY / "claims.json").read_text())["paper"]["title"]
    train = _job(runs, "train")
    commit = train.data.tags["mlflow.source.git.commit"]
    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run / 'results' / 'mlflow.db'}")
    models = {m.source_run_id: m.name for m in client.search_logged_models([exp_id])}
    datasets = [i.dataset.name for i in client.get_run(train.info.run_id).inputs.dataset_inputs]
    assert train.info.run_id in models and datasets
    page = _page(browser, height=max(VIEWPORT["height"], 380 + 34 * len(runs)))
    try:
        page.goto(f"{mlflow_ui}/#/experiments/{exp_id}/runs{UI_QUERY}")
        page.get_by_text("pipeline/").first.wait_for()
        _classic_layout(page)
        page.get_by_text(paper).first.wait_for()  # the description's heading, shown above the runs
        _expand_all(page)
        dataset_cell = _row_cell(page, train.info.run_name, "Dataset")
        models_cell = _row_cell(page, train.info.run_name, "Models")
        source_cell = _row_cell(page, train.info.run_name, "Source")
        dataset_text, models_text = dataset_cell.inner_text(), models_cell.inner_text()
        source_text = source_cell.inner_text()
        page.screenshot(path=str(shots / "mlflow_runs.png"))
        page.get_by_text("Datasets", exact=True).first.click()  # the Datasets filter: the study's data files
        page.get_by_text(f"{datasets[0]} (").first.wait_for()
        filter_lists = page.get_by_text(f"{datasets[0]} (").count()
        page.screenshot(path=str(shots / "mlflow_datasets_filter.png"))
        page.keyboard.press("Escape")
        page.goto(f"{mlflow_ui}/#/experiments/{exp_id}/runs/{train.info.run_id}{UI_QUERY}")  # the run's overview
        page.get_by_text(f"@{commit[:7]}").first.wait_for()
        overview_commit = page.get_by_text(commit[:7]).count()
        page.screenshot(path=str(shots / "mlflow_run_overview.png"))
        page.goto(f"{mlflow_ui}/#/experiments/{exp_id}/models{UI_QUERY}")
        page.get_by_text(models[train.info.run_id]).first.wait_for()
        listed = [name for name in models.values() if page.get_by_text(name).count()]
        page.screenshot(path=str(shots / "mlflow_models.png"))
    finally:
        page.close()
    assert datasets[0] in dataset_text or datasets[0][:20] in dataset_text, dataset_text
    assert models[train.info.run_id][:20] in models_text, models_text
    assert f"@{commit[:7]}" in source_text and source_text.strip().startswith(f"{UI_STUDY}:train"), source_text
    assert filter_lists >= 1 and overview_commit >= 1
    assert sorted(listed) == sorted(models.values())


def test_summary_run_renders_the_claims_table(browser, mlflow_ui, smoke_run, store, shots):
    """The summary run's ``claims_table.json`` opens in the artifact view as a table: its header has the claims
    table's columns and its rows the claims of ``claims.csv``."""
    import pandas as pd

    exp_id, runs = store["icml25/summary"]
    (run,) = [r for r in runs if r.info.run_name == "summary"][-1:]
    csv = pd.read_csv(smoke_run / "results" / "smoke" / "claims.csv")
    first = csv.iloc[0]
    page = _page(browser)
    try:
        page.goto(f"{mlflow_ui}/#/experiments/{exp_id}/runs/{run.info.run_id}/artifacts{UI_QUERY}")
        page.get_by_text("claims_table.json").first.wait_for()
        _classic_layout(page)
        page.get_by_text("claims_table.json").first.click()
        page.get_by_text("View as table").first.wait_for()
        page.get_by_text(str(first["claim"]), exact=True).first.wait_for()
        header = [h.strip() for h in page.locator("[role=columnheader], th").all_inner_texts()]
        page.screenshot(path=str(shots / "mlflow_claims_table.png"))
    finally:
        page.close()
    assert {"study", "claim", "kind", "verdict", "key_numbers", "threshold"} <= set(header), header
