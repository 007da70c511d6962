"""`make lab` in a real browser: JupyterLab loads, the report notebook runs top to bottom on the project's
kernel, and its charts are rendered by JupyterLab's Vega extension (interactive), not as static pictures.

Headless Chromium and chromedriver come from Debian (`.ci/run` installs them); without them this is skipped."""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import ROOT, chromium, needs_chromium

pytestmark = needs_chromium
WORK = ROOT / "build" / "test" / "lab"
# the notebook on screen (lab's current widget): the page also holds any other tab's, hidden
NB = "const nb = window.jupyterapp.shell.currentWidget.node;"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab():
    # a copy of the report notebook, so JupyterLab's autosave never writes outputs into notebooks/
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "99_report.ipynb", WORK / "99_report.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    # lab's workspace and settings of its own: a user's restored tabs (or those of an earlier test, which lab saves
    # in ~/.jupyter) would open other notebooks beside this one, and their hidden charts are in the page too
    extra = (
        f"--port={port} --IdentityProvider.token={token} --expose-app-in-browser "
        f"--LabApp.workspaces_dir={WORK / 'workspaces'} --LabApp.user_settings_dir={WORK / 'user-settings'}"
    )
    # as a user starts it: the report reads the committed data/derived/, not the tests' data directory
    env = {k: v for k, v in os.environ.items() if k not in ("PGLAB_DATA_DIR", "PGLAB_STATE_DIR")}
    log = open(WORK / "lab.log", "w")
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"LAB_EXTRA={extra}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start: " + (WORK / "lab.log").read_text()[-2000:])
                time.sleep(0.5)
        yield base, token
    finally:
        # the server's own shutdown also shuts its kernels down (they run in sessions of their own, which a
        # signal to our process group would not reach); signals only if that fails
        try:
            urllib.request.urlopen(
                urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST"), timeout=10
            )
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture
def browser():
    with chromium("--window-size=1400,1000") as driver:
        yield driver


def _wait(driver, script: str, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def test_report_runs_in_jupyterlab_with_interactive_charts(lab, browser):
    base, token = lab
    rel = WORK.relative_to(ROOT) / "99_report.ipynb"
    browser.get(f"{base}/lab/tree/{rel}?token={token}")
    _wait(
        browser,
        "return window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell') !== null",
        90,
        "the lab page and the notebook",
    )
    # the notebook's kernel must be the project's, and idle, before running it
    _wait(
        browser,
        """const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return k && k.name === 'pglab' && k.status === 'idle';""",
        90,
        "the pglab kernel",
    )
    # run all cells once the session is ready; the command resolves when the last cell has run
    browser.set_script_timeout(240)
    ran = browser.execute_async_script("""const done = arguments[arguments.length - 1];
        const w = window.jupyterapp.shell.currentWidget;
        Promise.all([w.context.ready, w.sessionContext.ready])
            .then(() => window.jupyterapp.commands.execute('notebook:run-all-cells'))
            .then(r => done(String(r)), e => done('failed: ' + e));""")
    assert ran == "true", f"a cell failed or did not run ({ran})"
    # every code cell has run: read from the notebook's model, not the prompts on screen (JupyterLab draws only the
    # cells near the viewport, so an off-screen prompt may lag; on a loaded machine that failed a fixed 30 s wait)
    n_code = _wait(
        browser,
        """const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
        const code = [...Array(cells.length).keys()].map(i => cells.get(i)).filter(c => c.type === 'code');
        return code.length && code.every(c => c.executionCount !== null) && code.length;""",
        240,
        "all cells to run",
    )
    errors = browser.execute_script(
        NB
        + """return [...nb.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
        .map(e => e.textContent).filter(t => /Error|Traceback/.test(t));"""
    )
    assert errors == [], errors[0][:2000]
    # charts: rendered by the Vega extension into a canvas or SVG of real size, none fell back to a picture
    # drawn by Vega at real size: the canvas's (or SVG's) own width, not its box on screen (JupyterLab hides the
    # cells away from the viewport, whose charts then measure 0×0 though they are drawn)
    drawn = (
        NB
        + """const v = [...nb.querySelectorAll('.vega-embed')];
        const size = e => { const c = e.querySelector('canvas, svg');
            return c ? Number(c.getAttribute('width')) || 0 : 0; };
        return v.length && v.every(e => size(e) > 50) && v.length;"""
    )
    try:
        charts = _wait(browser, drawn, 120, "the charts to render")
    except pytest.fail.Exception:
        undrawn = browser.execute_script(
            NB
            + """return [...nb.querySelectorAll('.vega-embed')].filter(e => {
            const c = e.querySelector('canvas, svg'); return !(c && Number(c.getAttribute('width')) > 50); })
            .map(e => e.closest('.jp-Cell').innerText.slice(0, 100) + ' || ' + e.outerHTML.slice(0, 400));"""
        )
        console = [e["message"][:300] for e in browser.get_log("browser")][-5:]
        pytest.fail(f"charts not drawn: {undrawn[:3]}; browser console: {console}")
    # every chart offers its export menu (PNG / SVG) and no link out of the machine
    menus = browser.execute_script(
        NB
        + """return [...nb.querySelectorAll('.vega-embed')].map(e =>
        [...e.querySelectorAll('.vega-actions a')].map(a => a.textContent.trim()));"""
    )
    assert menus and all(any("PNG" in t for t in m) and any("SVG" in t for t in m) for m in menus), menus[:3]
    assert not any("Editor" in t for m in menus for t in m)
    static = browser.execute_script(NB + "return nb.querySelectorAll('.jp-RenderedSVG, .jp-RenderedImage').length")
    assert charts >= 2 and static == 0, (charts, static)
    assert n_code >= 5
    assert _tooltip_on_hover(browser), "no chart shows a tooltip when the pointer is over its marks"
    assert _zoomed_or_panned(browser) >= 1, "no chart with continuous axes zooms or pans"


def _current(driver):
    """The notebook on screen: the only one whose charts a pointer can reach."""
    return driver.execute_script(NB + "return nb")


def _show(driver, view) -> None:
    """Bring a chart into the viewport and wait until it is laid out there and still. JupyterLab lays out only the
    cells near the viewport (the others' charts have no box, and a pointer cannot reach them), and it scrolls the
    notebook itself while a run ends; a chart checked once may be off screen by the next pointer move."""
    placed = """const r = arguments[0].getClientRects()[0], y = r ? r.top + r.height / 2 : -1;
        if (r && r.width >= 50 && y > 0 && y < innerHeight) return [r.left, r.top, r.width, r.height].join();
        arguments[0].scrollIntoView({block: 'center'}); return '';"""
    last = driver.execute_script(placed, view)
    if last:  # already there: the common case, one call per pointer move
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        box = driver.execute_script(placed, view)
        if box and box == last:  # scrolled to, and no longer moving
            return
        last = box
    why = driver.execute_script(
        """const e = arguments[0], out = ['connected=' + e.isConnected];
        for (let a = e; a && a !== document.body; a = a.parentElement) {
            const c = getComputedStyle(a), r = a.getBoundingClientRect();
            out.push(a.tagName + '.' + [...a.classList].join('.') + ' d=' + c.display + ' v=' + c.visibility +
                ' cv=' + c.contentVisibility + ' ' + [r.top, r.width, r.height].map(Math.round).join('x'));
        }
        const sh = window.jupyterapp.shell;
        out.unshift('main=' + [...sh.widgets('main')].map(w => w.title.label + (w.isVisible ? '*' : '')).join(',')
            + ' current=' + (sh.currentWidget && sh.currentWidget.title.label));
        return out.join(' | ');""",
        view,
    )
    pytest.fail(f"a chart did not stay in the viewport for 60 s (last box {last!r}): {why}")


def _zoomed_or_panned(driver) -> int:
    """How many charts redraw when the wheel turns and the pointer drags over their plot (`charts.with_zoom` binds
    zoom and pan to the scales where both axes are continuous; the others ignore both). Real pointer events."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    from selenium.webdriver.common.by import By

    zoomed = 0
    for view in _current(driver).find_elements(By.CSS_SELECTOR, ".vega-embed canvas.marks"):
        _show(driver, view)
        w = view.size["width"]
        before = driver.execute_script("return arguments[0].toDataURL()", view)
        # a point inside the plot of a single chart, and of the first of a concatenation
        for dx, dy in ((0, 0), (-w // 4, 0)):
            ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(view, dx, dy), 0, -120).perform()
            time.sleep(0.3)
            # a chart that does not zoom passes the wheel on to the notebook, which scrolls it away
            _show(driver, view)
            ActionChains(driver).move_to_element_with_offset(view, dx, dy).click_and_hold().move_by_offset(
                30, 10
            ).release().perform()
        time.sleep(0.5)
        zoomed += driver.execute_script("return arguments[0].toDataURL()", view) != before
    return zoomed


def _tooltip_on_hover(driver) -> bool:
    """Interactive means Vega answers the pointer: sweep it over the first chart until a tooltip shows."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    # the chart's own drawing (not the export menu's icon), scrolled to and laid out: JupyterLab lays out only the
    # cells near the viewport, and a chart it has not laid out measures 0×0 (no point to hover over)
    view = _current(driver).find_element(By.CSS_SELECTOR, ".vega-embed canvas.marks, .vega-embed svg.marks")
    _show(driver, view)
    shown = (
        "const t = document.getElementById('vg-tooltip-element'); return t !== null && t.classList.contains('visible');"
    )
    # where the marks are: the canvas's coloured pixels (a mark's fill, not the white ground, grey grid or black
    # text), as offsets from its centre; a grid sweep could step over a thin bar, and a fixed wait could end before
    # a loaded machine shows the tooltip
    spots = driver.execute_script(
        """const c = arguments[0]; if (c.tagName !== 'CANVAS') return [];
        const g = c.getContext('2d'), d = g.getImageData(0, 0, c.width, c.height).data, r = c.getBoundingClientRect();
        const sx = r.width / c.width, sy = r.height / c.height, out = [];
        for (let y = 0; y < c.height && out.length < 40; y += 3) for (let x = 0; x < c.width; x += 3) {
            const i = 4 * (y * c.width + x), R = d[i], G = d[i + 1], B = d[i + 2], A = d[i + 3];
            if (A > 200 && Math.max(R, G, B) - Math.min(R, G, B) > 60) {
                out.push([Math.round(x * sx - r.width / 2), Math.round(y * sy - r.height / 2)]); x += 30; }
        }
        return out;""",
        view,
    )
    spots = [tuple(p) for p in spots]
    w, h = view.size["width"], view.size["height"]
    grid = [(x, y) for y in range(-h // 2 + 8, h // 2, 12) for x in range(-w // 2 + 8, w // 2, 24)]
    for x, y in [*spots, *grid]:
        _show(driver, view)
        ActionChains(driver).move_to_element_with_offset(view, x, y).perform()
        deadline = time.monotonic() + (2.0 if (x, y) in spots[:5] else 0.15)
        while time.monotonic() < deadline:
            if driver.execute_script(shown):
                return True
            time.sleep(0.05)
    return False


def _git_status(*paths: str) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def _open_and_save(browser, base: str, token: str, rel: str) -> str:
    """Open a notebook in lab, let its kernel run every cell, then save as autosave would; lab's own answer."""
    browser.get(f"{base}/lab/tree/{rel}?token={token}")
    _wait(
        browser,
        "return window.jupyterapp && [...window.jupyterapp.shell.widgets('main')].some(x => x.context && "
        f"x.context.path === '{rel}') && document.querySelector('.jp-Notebook .jp-Cell') !== null",
        90,
        f"{rel} in lab",
    )
    browser.set_script_timeout(240)
    # the tab of `rel`, not whichever is current: lab restores the tabs opened before beside it
    return browser.execute_async_script(
        """const done = arguments[arguments.length - 1], rel = arguments[0], app = window.jupyterapp;
        const w = [...app.shell.widgets('main')].find(x => x.context && x.context.path === rel);
        app.shell.activateById(w.id);
        Promise.all([w.context.ready, w.sessionContext.ready])
            .then(() => app.commands.execute('notebook:run-all-cells'))
            .then(() => w.context.save())
            .then(() => done('saved, dirty=' + w.context.model.dirty), e => done('failed: ' + e));""",
        rel,
    )


def _api(base: str, token: str, path: str, method: str = "GET", body: dict | None = None) -> tuple[int, dict]:
    """The contents API's status and answer for `path` (its model without content, or its error)."""
    import json
    import urllib.error

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{base}/api/contents/{path}?content=0&token={token}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_the_committed_report_is_read_only_in_lab(lab):
    """JupyterLab's own read-only mode: the contents API reports the committed report as not writable (so lab
    disables Save and offers Save As), and a save that comes anyway is refused with the reason, never dropped
    silently; the stage notebooks stay writable."""
    base, token = lab
    status, model = _api(base, token, "report/99_report.ipynb")
    assert status == 200 and model["writable"] is False, model
    status, model = _api(base, token, "notebooks/99_report.ipynb")
    assert status == 200 and model["writable"] is True, model
    before = (ROOT / "report" / "99_report.ipynb").read_bytes()
    nb = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    status, err = _api(base, token, "report/99_report.ipynb", "PUT", {"type": "notebook", "content": nb})
    assert status == 403 and "read-only" in err.get("message", ""), (status, err)
    status, err = _api(base, token, "report/99_report.ipynb", "DELETE")
    assert status == 403, (status, err)
    status, err = _api(base, token, "report/99_report.ipynb", "PATCH", {"path": "report/renamed.ipynb"})
    assert status == 403, (status, err)
    assert (ROOT / "report" / "99_report.ipynb").read_bytes() == before


def _open_and_run(browser, base: str, token: str, rel: str) -> dict:
    """Open a notebook in lab and let its kernel run every cell; what lab then offers for saving it."""
    browser.get(f"{base}/lab/tree/{rel}?token={token}")
    _wait(
        browser,
        "return window.jupyterapp && [...window.jupyterapp.shell.widgets('main')].some(x => x.context && "
        f"x.context.path === '{rel}') && document.querySelector('.jp-Notebook .jp-Cell') !== null",
        90,
        f"{rel} in lab",
    )
    browser.set_script_timeout(240)
    return browser.execute_async_script(
        """const done = arguments[arguments.length - 1], rel = arguments[0], app = window.jupyterapp;
        const w = [...app.shell.widgets('main')].find(x => x.context && x.context.path === rel);
        app.shell.activateById(w.id);
        Promise.all([w.context.ready, w.sessionContext.ready])
            .then(() => app.commands.execute('notebook:run-all-cells'))
            .then(() => done({writable: w.context.contentsModel.writable, canSave: w.context.canSave,
                              saveEnabled: app.commands.isEnabled('docmanager:save'),
                              caption: app.commands.caption('docmanager:save'), dirty: w.context.model.dirty}),
                  e => done({failed: String(e)}));""",
        rel,
    )


def test_opening_running_and_saving_in_lab_changes_no_tracked_file(lab, browser):
    """The committed report (nbval checks it byte for byte) and the stage notebooks (sources, kept without outputs)
    come out of a lab session as they went in: run every cell of each; the report opens read-only (Save disabled,
    its caption pointing to Save As), the stage notebook saves (as autosave does); save everything open once more
    at the end, compare the bytes."""
    base, token = lab
    before = _git_status("report", "notebooks")
    files = ["report/99_report.ipynb", "notebooks/99_report.ipynb", "notebooks/99_report.py"]
    want = {f: (ROOT / f).read_bytes() for f in files}
    shown = _open_and_run(browser, base, token, files[0])
    assert shown.get("writable") is False and shown["canSave"] is False, shown
    assert shown["saveEnabled"] is False and "Save as" in shown["caption"], shown
    said = _open_and_save(browser, base, token, files[1])
    assert said.startswith("saved"), said
    browser.execute_async_script("""const done = arguments[arguments.length - 1];
        window.jupyterapp.commands.execute('docmanager:save-all').then(() => done('ok'), e => done('failed: ' + e));""")
    time.sleep(2)
    changed = [f for f in files if (ROOT / f).read_bytes() != want[f]]
    assert changed == [], f"lab rewrote {changed}"
    assert _git_status("report", "notebooks") == before
