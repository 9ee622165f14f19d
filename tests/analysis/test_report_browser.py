"""The report in a real browser: headless Chromium opens report.html from disk, offline,
and a probe injected before any of the page's scripts reports what a reader would see:
no console error or uncaught exception, every plot drawn (Plotly's SVG inside each plot's
div), the table of contents and the headline, and no sideways scrolling at 1,280 px."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.analysis.test_report import make_run

from roboscale.analysis.report import render_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1280,900", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
]  # fmt: skip
# Installed before the page's own scripts: keeps every error, then (after the page
# loaded and its plots were drawn) writes what it saw into the DOM for --dump-dom.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message)); });
window.addEventListener('unhandledrejection', function (e) {
  window.__errors.push('rejection: ' + String(e.reason)); });
var __error = console.error;
console.error = function () { window.__errors.push(Array.from(arguments).join(' '));
  __error.apply(console, arguments); };
window.addEventListener('load', function () { setTimeout(function () {
  var plots = document.querySelectorAll('div.plot');
  var drawn = Array.from(plots).filter(function (p) {
    return p.querySelector('svg.main-svg') !== null; }).length;
  var out = {errors: window.__errors, plots: plots.length, drawn: drawn,
    toc: document.querySelectorAll('nav#toc li a').length,
    headline: (document.querySelector('#headline') || {}).innerText || '',
    first: (document.querySelector('h2') || {}).innerText || '',
    scroll_width: document.documentElement.scrollWidth, width: window.innerWidth};
  var pre = document.createElement('pre'); pre.id = 'probe';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 500); });
</script>"""


def open_in_chromium(html: Path, profile: Path) -> tuple[dict[str, object], str]:
    """What the probe saw in `html`, and Chromium's log."""
    probed = html.with_name("probed.html")
    page = html.read_text()
    probed.write_text(page.replace("<head>", "<head>" + PROBE, 1))
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=30000",
         "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", done.stdout, re.S)
    assert found, f"no probe in the dumped page; chromium said:\n{done.stderr[-3000:]}"
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&")), done.stderr


def check(seen: dict[str, object], log: str, headline: str = "Fastest backend") -> None:
    assert seen["errors"] == [], seen["errors"]
    console = [line for line in log.splitlines() if "CONSOLE" in line and "error" in line.lower()]
    assert console == [], console
    assert seen["plots"] and seen["drawn"] == seen["plots"], seen
    assert isinstance(seen["toc"], int) and seen["toc"] >= 5
    assert seen["first"] == "Headline"
    assert headline in str(seen["headline"])
    assert seen["scroll_width"] <= seen["width"], seen  # no sideways scrolling at 1,280 px


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make system)")
def test_report_renders_in_chromium(tmp_path: Path) -> None:
    make_run(tmp_path / "run")
    html, _ = render_report(tmp_path / "run")
    seen, log = open_in_chromium(html, tmp_path / "profile")
    check(seen, log)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make system)")
def test_graph_report_renders_in_chromium(tmp_path: Path) -> None:
    """The node graph (arrows as annotations), per-path and per-topic boxes, a timeline."""
    from tests.analysis.test_graphplots import make_graph_run

    make_graph_run(tmp_path / "run", ("native", "zenoh"))
    html, _ = render_report(tmp_path / "run")
    seen, log = open_in_chromium(html, tmp_path / "profile")
    check(seen, log, headline="Graph paths, end to end")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make system)")
def test_demo_report_renders_in_chromium(tmp_path: Path) -> None:
    """The demo itself (`make demo`'s spec, quick), run for real and opened."""
    spec = Path(__file__).parents[2] / "experiments" / "demo.yaml"
    out = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-c", "from roboscale.cli import main; main()", "bench", str(spec),
         "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Fastest backend per configuration:" in run.stdout  # the headline on the terminal
    seen, log = open_in_chromium(out / "report.html", tmp_path / "profile")
    check(seen, log)
