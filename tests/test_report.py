"""The HTML report: its content, checked in Python, and its rendering in a real headless
Chromium (Debian's ``chromium`` driven by Playwright): no console error, no request leaving
the page, every figure decoded; a screenshot is kept in ``tests/artifacts/``.

The browser test fails when Chromium is missing (``.ci/run`` installs it); set
``GPEXPLAIN_SKIP_BROWSER=1`` to skip it deliberately on a machine without one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from gpexplain.cli import app
from gpexplain.explain.methods import METHODS
from gpexplain.report import write_report
from tests.test_cli import one_start

runner = CliRunner()
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("GPEXPLAIN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """One ``explain --report`` run on a small table with a text column (6 rows explained)."""
    folder = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(5)
    n_rows = 40
    frame = pd.DataFrame(
        {"a": rng.uniform(-2, 2, n_rows), "b": rng.uniform(0, 5, n_rows),
         "kind": rng.choice(["x", "y<&>"], n_rows)}  # a label HTML must escape
    )
    frame["target"] = np.sin(frame["a"]) + 0.3 * frame["b"] + (frame["kind"] == "x")
    data = folder / "table.csv"
    frame.to_csv(data, index=False)
    out = folder / "out"
    patch = pytest.MonkeyPatch()
    one_start(patch)
    try:
        result = runner.invoke(
            app, ["explain", str(data), "--target", "target", "--rows", "0:6", "--report",
                  "--out", str(out)],
        )
    finally:
        patch.undo()
    assert result.exit_code == 0, result.output
    return out


def test_report_content(explained):
    page = (explained / "report.html").read_text(encoding="utf-8")
    summary = json.loads((explained / "summary.json").read_text())
    for heading in ("Data and model", "Fit quality", "Global importance",
                    "Per-row explanations", "Completeness checks", "Method and references"):
        assert f"<h2>{heading}</h2>" in page
    assert "Butler" in page and "Explainable Learning with Gaussian Processes" in page
    assert f"{summary['holdout']['r2']:.3f}" in page
    # the exact importance of summary.json (issue 25): bars and the pairwise probabilities
    importance = summary["global_importance"]
    assert set(importance["mean"]) == {"a", "b", "kind"}  # the one-hot columns grouped
    assert "exact posterior standard deviation" in page and "conservative" not in page
    first, second = sorted(importance["mean"], key=importance["mean"].get)[::-1][:2]
    assert f"{importance['probability_greater'][first][second]:.3f}" in page
    assert "y&lt;&amp;&gt;" in page and "y<&>" not in page
    # 2 global figures, 3 dependence plots, one waterfall per explained row
    assert page.count('src="data:image/png;base64,') == 2 + 3 + 6
    assert page.count('<span class="ok">ok</span>') == 6
    # self-contained: no URL to fetch anywhere
    assert not re.search(r"(src|href)=[\"'](?!data:)", page)
    assert "http://" not in page and "https://" not in page


def test_report_command_and_errors(explained, tmp_path):
    target = tmp_path / "copy.html"
    result = runner.invoke(app, ["report", str(explained), "--output", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = runner.invoke(app, ["report", str(empty)])
    assert refused.exit_code == 2 and "no summary.json" in refused.stderr
    old = tmp_path / "old"
    shutil.copytree(explained, old)
    summary = json.loads((old / "summary.json").read_text())
    del summary["predictions"]
    (old / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"missing \['predictions'\]"):
        write_report(old)


def test_report_in_headless_chromium(explained):
    if os.environ.get("GPEXPLAIN_SKIP_BROWSER") == "1":
        pytest.skip("GPEXPLAIN_SKIP_BROWSER=1: browser test skipped on request")
    assert Path(CHROMIUM).is_file(), (
        f"no Chromium at {CHROMIUM}: install Debian's chromium (.ci/run does), point "
        "GPEXPLAIN_CHROMIUM at one, or set GPEXPLAIN_SKIP_BROWSER=1"
    )
    from playwright.sync_api import sync_playwright

    errors, requests = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto((explained / "report.html").as_uri(), wait_until="load")
            widths = page.eval_on_selector_all(
                "img", "images => images.map(i => i.complete ? i.naturalWidth : 0)"
            )
            headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []
    assert len(widths) == 11 and all(w > 0 for w in widths), widths
    assert "Completeness checks" in headings
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_report_flags_a_completeness_violation_and_cites_the_method(explained, tmp_path):
    tampered = tmp_path / "tampered"
    shutil.copytree(explained, tampered)
    table = pd.read_csv(tampered / "attributions.csv")
    table.loc[(table["point"] == 2) & (table["feature"] == "b"), "attribution"] += 0.01
    table.to_csv(tampered / "attributions.csv", index=False)
    summary = json.loads((tampered / "summary.json").read_text())
    # The citations are the method registry's entry recorded with the run (integrated
    # gradients here), not a guess from the method's free text.
    assert summary["method_id"] == "integrated-gradients"
    summary["method"] = "Shapley values (orthogonal additive GP, exact)"
    (tampered / "summary.json").write_text(json.dumps(summary))
    page = write_report(tampered).read_text(encoding="utf-8")
    assert page.count('<span class="bad">violated</span>') == 1
    assert page.count('<span class="ok">ok</span>') == 5
    for reference in METHODS.get("integrated-gradients").references:
        assert reference.title in page
    assert "Additive Gaussian processes revisited" not in page
    value = table.loc[table["feature"] == "a", "value"].astype(float).iloc[0]
    assert f">{value:.4g}</td>" in page and repr(float(value)) not in page  # formatted


def test_report_of_a_summary_without_references_says_so(explained, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(explained, older)
    summary = json.loads((older / "summary.json").read_text())
    del summary["references"], summary["method_id"]
    (older / "summary.json").write_text(json.dumps(summary))
    page = write_report(older).read_text(encoding="utf-8")
    assert "records no references" in page and "Butler" not in page


SCRIPT = "<script>alert(1)</script>"


def _hostile(value):
    """Every string of a summary (not its keys) replaced by a script tag."""
    if isinstance(value, str):
        return SCRIPT
    if isinstance(value, dict):
        return {key: _hostile(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hostile(item) for item in value]
    return value


def test_report_escapes_every_summary_value(explained, tmp_path):
    foreign = tmp_path / "foreign"  # an output folder from elsewhere
    foreign.mkdir()
    shutil.copy(explained / "attributions.csv", foreign)
    summary = _hostile(json.loads((explained / "summary.json").read_text()))
    summary["holdout"].update(n_train=SCRIPT, n_test=SCRIPT, test_fraction=SCRIPT)
    summary["completeness_gap"] = {"mean": SCRIPT, "variance": SCRIPT}
    (foreign / "summary.json").write_text(json.dumps(summary))
    page = write_report(foreign).read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;" in page
