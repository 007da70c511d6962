"""The HTML report as a reader sees it, in headless Chromium: the committed report/report.html and one rendered
here from the committed data/derived/default (`python -m pglab.report --only 99`, no server).

Checked: the first screen (1280×800, before scrolling) holds the summary of answers, not the data inventory;
every study section has a chart drawn as SVG; every folded block (`<details>`) opens on a click and shows its
content; and nothing is requested from outside the machine (every URL in Chrome's network log is file: or data:).

Headless Chromium and chromedriver come from Debian (`.ci/run` installs them); without them this is skipped."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, chromium, needs_chromium

pytestmark = needs_chromium
VIEWPORT = (1280, 800)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report")
    # as a user runs it: the committed data/derived/, not the tests' data directory
    env = {k: v for k, v in os.environ.items() if k not in ("PGLAB_DATA_DIR", "PGLAB_STATE_DIR", "PGLAB_DERIVED_DIR")}
    run = subprocess.run(
        [sys.executable, "-m", "pglab.report", "--params", "params/default.yaml", "--only", "99", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return str(out / "report.html")


@pytest.fixture(params=["committed", "rendered"])
def page(request, browser):
    path = str(ROOT / "report" / "report.html") if request.param == "committed" else request.getfixturevalue("rendered")
    browser.get("file://" + path)
    browser.execute_script("window.scrollTo(0, 0)")
    return browser


@pytest.fixture
def rendered_page(browser, rendered):
    """The freshly rendered report only, for the slow walks over every block: the committed one comes from the same
    template (strict nbval holds it to the committed data)."""
    browser.get("file://" + rendered)
    browser.execute_script("window.scrollTo(0, 0)")
    return browser


@pytest.fixture(scope="module")
def browser():
    """One browser for the module (each test loads its page afresh): a start per test cost more than the tests."""
    with chromium("--hide-scrollbars", performance_log=True) as driver:
        # the viewport itself, not the window around it
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver


def test_first_screen_holds_the_summary_not_the_inventory(page):
    seen = page.execute_script("""
        const h = window.innerHeight, vis = e => { const r = e.getBoundingClientRect();
            return r.height > 0 && r.top < h && r.bottom > 0; };
        const summary = document.querySelector('table.pglab-sum');
        // rows that begin on the first screen (the header, the first claim): its key sits above them
        const rows = [...(summary ? summary.querySelectorAll('tr') : [])]
            .filter(r => r.getBoundingClientRect().top < h - 10);
        const appendix = [...document.querySelectorAll('h2')].find(e => /Appendix/.test(e.textContent));
        const inventory = [...document.querySelectorAll('table')].filter(t => /sha256/.test(t.rows[0]?.textContent));
        return {height: h, summary: !!summary, summaryTop: summary && summary.getBoundingClientRect().top,
                rows: rows.length, appendixShown: !!appendix && vis(appendix), inventories: inventory.length,
                inventoryShown: inventory.some(vis), polars: /shape: \\(/.test(document.body.innerText.slice(0, 3000))};
    """)
    assert seen["height"] == VIEWPORT[1], seen
    # the tallies and the plain answers first (test_first_screen_holds_the_plain_answers), then the table begins
    assert seen["summary"] and 0 <= seen["summaryTop"] < VIEWPORT[1], seen
    assert seen["rows"] >= 2, f"the first screen begins only {seen['rows']} rows of the summary: {seen}"
    assert seen["inventories"] == 1 and not seen["inventoryShown"] and not seen["appendixShown"], seen
    assert not seen["polars"], "a polars printout near the top"


def _first_screen_text(page) -> str:
    return page.execute_script("""const h = window.innerHeight;
        return [...document.querySelectorAll('p, h1, h2, blockquote')].filter(e => {
            const r = e.getBoundingClientRect(); return r.height > 0 && r.bottom <= h && r.top >= 0; })
            .map(e => e.innerText).join('\\n');""")


def test_first_screen_names_the_run(page):
    """Before scrolling: the run id, when, the profile and the machine (a report never leaves a reader guessing
    which run it shows)."""
    manifest = json.loads((ROOT / "data" / "derived" / "default" / "MANIFEST.json").read_text())
    run = {e["run_id"] for e in manifest.values() if isinstance(e, dict) and e.get("run_id")}.pop()
    text = _first_screen_text(page)
    for want in (f"Run {run}", "measured 2026-", "with profile default", "cores", "GiB", "Servers:"):
        assert want in text, f"{want!r} not on the first screen: {text[:800]}"
    assert "Not the reference report" not in text


def test_a_quick_render_opens_with_its_banner(browser, tmp_path):
    """Any profile but the reference says what it is at the top: quick is a smoke test (the committed tables under
    the quick profile's name: the banner comes from the params, the tables are only there to be shown)."""
    shutil.copytree(ROOT / "data" / "derived" / "default", tmp_path / "data" / "derived" / "quick")
    env = {k: v for k, v in os.environ.items() if k not in ("PGLAB_STATE_DIR", "PGLAB_DERIVED_DIR")}
    env["PGLAB_DATA_DIR"] = str(tmp_path / "data")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pglab.report",
            "--params",
            "params/quick.yaml",
            "--only",
            "99",
            "--out",
            str(tmp_path / "report"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    browser.get("file://" + str(tmp_path / "report" / "report.html"))
    text = _first_screen_text(browser)
    assert "Not the reference report. Profile quick (SSB at SF 0.05, 2 rounds): a smoke test" in text, text[:800]


CHART_TEXTS = r"""
const out = [];
const imgs = [...document.querySelectorAll('img')].filter(i => i.src.startsWith('data:image/svg+xml'));
for (const img of imgs) {
  let text = img.src.slice(img.src.indexOf(',') + 1);
  text = img.src.includes(';base64,') ? new TextDecoder().decode(Uint8Array.from(atob(text), c => c.charCodeAt(0)))
                                      : decodeURIComponent(text);
  const box = document.createElement('div');
  box.style.position = 'absolute'; box.style.left = '0'; box.style.top = '0';
  box.innerHTML = text; document.body.appendChild(box);  // laid out as the browser draws it
  const title = [...box.querySelectorAll('.role-title-text')].map(t => t.textContent).join(' ');
  const texts = [...box.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const [a, ra] = texts[i], [b, rb] = texts[j];
    const ox = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
    const oy = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
    if (ox > 1 && oy > 1) out.push(`${title}: "${a}" overlaps "${b}"`);
  }
  for (const [t] of texts) if (t.endsWith('…')) out.push(`${title}: "${t}" is cut`);
  box.remove();
}
return out;"""


def test_no_chart_label_overlaps_another_or_is_cut(page):
    """Every text of every chart (axis labels and titles, legends, annotations, facet headers) as the browser lays
    it out: no two overlap by more than a pixel each way, none is cut short with an ellipsis."""
    problems = page.execute_script(CHART_TEXTS)
    assert problems == [], "\n".join(problems[:20])


def test_every_study_section_has_an_svg_chart(page):
    sections = page.execute_script("""
        const out = {}; let current = null;
        // nbconvert inlines a chart's SVG as an <img> of data:image/svg+xml; rendered = decoded, of real size
        const charts = 'h2, [data-mime-type="image/svg+xml"] svg, [data-mime-type="image/svg+xml"] img';
        for (const e of document.querySelectorAll(charts)) {
            if (e.tagName === 'H2') { current = /^S\\d/.test(e.textContent.trim()) ? e.textContent.trim() : null;
                                      if (current) out[current] = 0; }
            else if (current && e.getBoundingClientRect().width > 50 && (e.tagName !== 'IMG' ||
                     (e.src.startsWith('data:image/svg+xml') && e.complete && e.naturalWidth > 0))) out[current] += 1;
        }
        return out;""")
    assert len(sections) == 6, sections
    assert all(n >= 1 for n in sections.values()), sections


def test_every_details_opens(rendered_page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    page = rendered_page
    url = page.current_url
    blocks = page.find_elements(By.CSS_SELECTOR, "details")
    assert len(blocks) >= 48, len(blocks)  # one per claim at least
    for d in blocks:
        summary = page.execute_script(
            """const s = arguments[0].querySelector(':scope > summary');
            s.scrollIntoView({block: 'center'}); return arguments[0].open ? null : s;""",
            d,
        )
        assert summary is not None, d.get_attribute("outerHTML")[:200]  # folded to start with
        # the marker end of the line: a click there opens the block and follows no link inside the summary
        ActionChains(page).move_to_element_with_offset(summary, -summary.size["width"] // 2 + 4, 0).click().perform()
    shut = page.execute_script("""return [...document.querySelectorAll('details')].filter(d => !d.open ||
        ![...d.children].some(c => c.tagName !== 'SUMMARY' && c.getClientRects().length > 0 &&
                                    getComputedStyle(c).visibility !== 'hidden'))
        .map(d => d.querySelector('summary').textContent.slice(0, 120));""")
    assert shut == [], f"{len(shut)} blocks did not open or show their content: {shut[:5]}"
    assert page.current_url == url


def test_no_request_leaves_the_machine(page):
    page.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    for d in page.execute_script("return [...document.querySelectorAll('details')]"):
        page.execute_script("arguments[0].open = true", d)
    urls = []
    for entry in page.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] in ("Network.requestWillBeSent", "Network.webSocketCreated"):
            urls.append(msg["params"].get("request", {}).get("url") or msg["params"].get("url", ""))
    assert any(u.startswith("file://") and u.endswith("report.html") for u in urls), urls[:5]
    outside = [u for u in urls if not u.startswith(("file://", "data:"))]
    assert outside == [], outside[:10]


WIDE_TABLES = """return [...document.querySelectorAll('table')].filter(t =>
    t.getBoundingClientRect().width > t.parentElement.clientWidth + 1).map(t => (t.rows[0] || {}).innerText)"""


def test_no_table_runs_past_the_page(page):
    assert page.execute_script(WIDE_TABLES) == []


def test_compare_tables_wrap_within_the_page(browser, tmp_path):
    """A comparison's widest table (every measurement: a dozen numeric columns) wraps at 1280 px."""
    from pglab.report import compare

    for name in ("a", "b"):
        shutil.copytree(ROOT / "data" / "derived" / "default", tmp_path / name)
    assert compare.main(["--a", str(tmp_path / "a"), "--b", str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0
    browser.get("file://" + str(tmp_path / "out" / "compare.html"))
    assert browser.execute_script("return document.querySelectorAll('table').length") >= 2
    assert browser.execute_script(WIDE_TABLES) == []


def test_first_screen_holds_the_plain_answers(page):
    """The tallies, then the studies' plain sentences (`Study.answers`), all on the first 1280×800 screen."""
    lis = page.execute_script("""const h = [...document.querySelectorAll('p, strong')].find(e =>
        e.innerText.startsWith('In brief')); if (!h) return null;
        const ul = h.closest('.jp-RenderedMarkdown').querySelector('ul');
        return ul ? [...ul.querySelectorAll('li')].map(l => [l.innerText, l.getBoundingClientRect().bottom]) : [];""")
    assert lis, "no 'In brief' answers on the page"
    assert len(lis) >= 5, lis
    assert all(bottom <= VIEWPORT[1] for _, bottom in lis), [t[:40] for t, b in lis if b > VIEWPORT[1]]
    assert all(any(c.isdigit() for c in text) for text, _ in lis), "an answer without a figure or scale"
