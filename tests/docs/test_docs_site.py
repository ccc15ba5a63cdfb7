"""The docs site as a reader sees it: built with warnings as errors, opened in headless Chromium.

The build is ``make docs``'s (incremental, into docs/_build/html). The pages are served on
127.0.0.1 and opened with Selenium driving Debian's ``chromium`` / ``chromedriver``: each main
page renders with its title, its code is highlighted, its images load, the search finds
``experimental_distribute_dataset``; every internal link of every page resolves (file and
anchor), and every public name has its anchor in the API reference.

Without a browser (Chromium, chromedriver and the ``selenium`` package of the ``docs`` extra)
the browser tests skip, saying what to install — unless ``TPS_REQUIRE_BROWSER`` is set, as
``make docs-check`` (and so CI) sets it: then a missing browser fails.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse

import pytest

from tests.docs.test_docs_coverage import public_names_on_disk

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HTML = DOCS / "_build" / "html"
MAIN_PAGES = ["index", "getting_started", "porting", "concepts/index", "concepts/strategy", "concepts/compilation",
              "concepts/distributed_values", "concepts/variables", "concepts/input", "concepts/checkpoints",
              "concepts/multi_host", "concepts/model_parallelism", "concepts/keras", "differences", "performance",
              "architecture", "about", "api/index", "api/tpustrategy", "api/tpustrategy.data"]
PAGES_WITH_CODE = {"getting_started", "porting", "concepts/strategy", "concepts/compilation", "concepts/checkpoints",
                   "concepts/model_parallelism", "concepts/keras"}


def _browser() -> tuple[str, str] | str:
    """``(chromium, chromedriver)`` paths, or why there is no browser to drive."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return ("the selenium package is not installed in this Python: pip install -e '.[docs]' "
                "(make docs-check does it)")
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                    None)
    driver = shutil.which("chromedriver") or next(
        (p for p in ("/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver") if os.path.exists(p)), None)
    if not chromium or not driver:
        return ("no headless Chromium here (chromium and chromedriver): apt-get install chromium chromium-driver "
                "(make docs-check installs them)")
    return chromium, driver


def _require_browser() -> tuple[str, str]:
    found = _browser()
    if isinstance(found, str):
        if os.environ.get("TPS_REQUIRE_BROWSER"):
            pytest.fail(f"TPS_REQUIRE_BROWSER is set but {found}")
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def site() -> pathlib.Path:
    """The built site, brought up to date as ``make docs`` does (warnings are errors)."""
    _require_browser()
    if importlib.util.find_spec("sphinx") is None:  # a test leg without the docs extra
        if os.environ.get("TPS_REQUIRE_BROWSER"):
            pytest.fail("TPS_REQUIRE_BROWSER is set but Sphinx is not installed: pip install -e '.[docs]'")
        pytest.skip("the docs extra (Sphinx) is not installed here: make docs-check installs it")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
         "-d", str(DOCS / "_build" / "doctrees"), str(DOCS), str(HTML)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, f"make docs failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    return HTML


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: ANN002
        pass


@pytest.fixture(scope="module")
def browser(server):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = _require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(browser, server, page: str) -> list[str]:
    """Opens a page; returns the severe messages of its console (missing files, script errors)."""
    browser.get(f"{server}/{page}.html")
    return [e["message"] for e in browser.get_log("browser")
            if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", MAIN_PAGES)
def test_page_renders(browser, server, page):
    from selenium.webdriver.common.by import By

    errors = _open(browser, server, page)
    assert not errors, f"{page}: console errors {errors}"
    headings = browser.find_elements(By.CSS_SELECTOR, "article h1")
    assert headings and headings[0].text.strip(), f"{page}: no title rendered"
    body = browser.find_element(By.CSS_SELECTOR, "article").text
    assert len(body) > 300, f"{page}: {len(body)} characters of text"
    broken = browser.execute_script(
        "return Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert not broken, f"{page}: images that did not load: {broken}"
    hidden = browser.execute_script(
        "return Array.from(document.querySelectorAll('article .table-wrapper'))"
        ".filter(w => w.scrollWidth > w.clientWidth + 2).length")
    assert hidden == 0, f"{page}: {hidden} tables wider than the page (columns hidden behind a scroll)"
    if page in PAGES_WITH_CODE:
        blocks = browser.find_elements(By.CSS_SELECTOR, "div.highlight-python pre, div.highlight-bash pre")
        assert blocks, f"{page}: no highlighted code block"
        colors = browser.execute_script("""
            const pre = document.querySelector('div.highlight-python pre, div.highlight-bash pre');
            const kw = pre.querySelector('span.kn, span.k, span.nb');
            return [getComputedStyle(pre).color, kw ? getComputedStyle(kw).color : null];""")
        assert colors[1] is not None and colors[1] != colors[0], f"{page}: keywords are not coloured: {colors}"


def test_performance_page_shows_a_plot_per_family(browser, server):
    from selenium.webdriver.common.by import By

    _open(browser, server, "performance")
    plots = browser.find_elements(By.CSS_SELECTOR, "img.benchmark-plot")
    tables = browser.find_elements(By.CSS_SELECTOR, "div.benchmark-family table")
    assert len(plots) == len(tables) >= 8
    assert all(browser.execute_script("return arguments[0].naturalWidth", p) > 300 for p in plots)


@pytest.mark.timeout(300)
def test_search_finds_experimental_distribute_dataset(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/search.html?q=experimental_distribute_dataset")
    WebDriverWait(browser, 120).until(  # results are shown one by one, then the summary
        lambda d: "found" in " ".join(e.text for e in d.find_elements(By.CSS_SELECTOR, "#search-results p")))
    hrefs = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a")]
    assert any("/api/tpustrategy.html#tpustrategy.Strategy.experimental_distribute_dataset" in h for h in hrefs), hrefs


def test_porting_guide_rows_link_to_the_api(browser, server):
    from selenium.webdriver.common.by import By

    fixture = pathlib.Path(__file__).parent / "fixtures" / "readme_rename_rows.md"
    def squeeze(text: str) -> str:  # the page's text has smart quotes and ellipses
        return re.sub(r"\s+", "", text).replace("\u2019", "'").replace("\u2026", "...")

    renames = {squeeze(re.split(r"(?<!\\)\|", line)[1].replace("`", "").replace("\\|", "|"))
               for line in fixture.read_text().splitlines() if line.startswith("| ")}
    _open(browser, server, "porting")
    rows = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "article table tbody tr"):
        first = squeeze(row.find_elements(By.CSS_SELECTOR, "td")[0].get_attribute("textContent"))
        if first in renames:
            rows[first] = bool(row.find_elements(By.CSS_SELECTOR, "a[href*='api/']"))
    assert len(rows) >= len(renames) - 2, sorted(renames - set(rows))
    unlinked = [first for first, linked in rows.items() if not linked]
    # Keras's own callbacks have no entry of ours: the one row that cannot link.
    assert all(first.startswith("keras.callbacks.") for first in unlinked) and len(unlinked) <= 1, unlinked
    target = browser.find_element(By.XPATH, "//a[code[normalize-space()='tf.distribute.TPUStrategy']]")
    assert target.get_attribute("href").endswith("api/tpustrategy.html#tpustrategy.TPUStrategy")


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) and (tag != "link" or key == "href"):
                self.hrefs.append(attrs[key])


def test_no_internal_link_is_broken(site):
    parsed: dict[pathlib.Path, _Links] = {}

    def parse(path: pathlib.Path) -> _Links:
        if path not in parsed:
            p = _Links()
            p.feed(path.read_text(errors="replace"))
            parsed[path] = p
        return parsed[path]

    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts]
    assert len(pages) >= 30
    broken = []
    for page in pages:
        for href in parse(page).hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme or url.netloc or href.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {href} (no file)")
            elif url.fragment and target.suffix == ".html" and url.fragment not in parse(target).ids:
                broken.append(f"{page.relative_to(site)}: {href} (no anchor)")
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:50])


def test_every_public_name_has_an_anchor_in_the_built_reference(site):
    missing = []
    for full in public_names_on_disk():
        page = site / "api" / f"{full.rsplit('.', 1)[0]}.html"
        if not page.exists() or f'id="{full}"' not in page.read_text():
            missing.append(full)
    assert not missing, f"{len(missing)} public names without an anchor in the built API reference: {missing}"
