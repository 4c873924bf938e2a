"""The web page in a real browser: headless Chromium (Debian's) driven by Playwright, against a real daemon.

One browser, one daemon and one ``aivault web`` serve the whole module; each test opens its own page.
Without the system Chromium or Playwright the module is skipped and says why. A screenshot of a
search is saved to ``build/test-artifacts/web-search.png``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aivault import policy
from aivault.home import Home, write_private
from aivault.web.server import open_file
from tests.builders import ClaudeWriter
from tests.support.allhosts import DEVBOX, HUNG, add_hung, make_machines, remove_hung
from tests.support.common import REPO
from tests.support.daemons import DaemonProcess
from tests.support.webserver import WebProcess

CHROMIUM = os.environ.get("AIVAULT_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "build" / "test-artifacts"

if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
    pytest.skip(f"no Chromium at {CHROMIUM} (Debian package chromium; ./dev test installs it)",
                allow_module_level=True)
try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError as exc:  # pragma: no cover - the test extra installs it
    pytest.skip(f"playwright is not installed ({exc}): pip install -e '.[test]'", allow_module_level=True)

SESSIONS = 14


class Site:
    def __init__(self, home: Home, roots: dict[str, Path], daemon: DaemonProcess, web: WebProcess) -> None:
        self.home, self.roots, self.daemon, self.web = home, roots, daemon, web


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("web-browser")
    home = Home.resolve(base / "home").ensure()
    policy.save(home, policy.Policy(True, None))
    write_private(home.config_path, b'{"embed": {"enabled": false}}')
    roots = {"claude": base / "claude" / "projects", "codex": base / "codex" / "sessions"}
    for r in roots.values():
        r.mkdir(parents=True)
    recent = datetime.now(UTC) - timedelta(days=1)
    for i in range(SESSIONS):
        # Recent, so that the retention test's 30 days keep every session.
        c = ClaudeWriter(roots["claude"], cwd=f"/home/dev/service-{i}", branch=f"fix/lock-{i}", start=recent)
        c.title(f"Service {i}: the DuckDB lock")
        for k in range(8):
            c.user(f"step {k} of service {i}")
            c.assistant(f"done step {k}")
        c.user(f"why does the duckdb lock <b>error</b> come back in service {i}?")
        c.assistant(f"service {i}: the read-only handle kept the lock; closing it fixed the error")
    daemon = DaemonProcess(home, roots)
    daemon.reconcile()
    web = WebProcess(home)
    try:
        yield Site(home, roots, daemon, web)
    finally:
        web.stop()
        daemon.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser, site: Site) -> Iterator[Page]:
    """A fresh browser profile that opened the URL `aivault web` printed (its token signs it in)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    pg.goto(site.web.url)
    expect(pg.locator("body")).to_have_attribute("data-ready", "yes")
    try:
        yield pg
    finally:
        ctx.close()


def test_the_printed_url_signs_in_and_leaves_the_address_bar(page: Page, site: Site) -> None:
    """After the printed URL the page is at / without the token, its cookie is out of the script's reach, and a
    profile that never opened the URL gets the sign-in page and no data."""
    assert page.url == site.web.base and "token" not in page.url
    assert page.evaluate("document.cookie") == ""
    assert page.evaluate("fetch('/api/status').then(r => r.status)") == 200
    stranger = page.context.browser.new_context() if page.context.browser else None
    assert stranger is not None
    try:
        pg = stranger.new_page()
        response = pg.goto(site.web.base)
        assert response is not None and response.status == 401
        expect(pg.locator("body")).to_contain_text("aivault web")
        assert pg.locator("meta[name=aivault-config]").count() == 0
        # With the profile's cookies (none for this server): the API refuses too.
        assert stranger.request.get(site.web.base + "api/search?query=duckdb").status == 401
    finally:
        stranger.close()


def test_the_open_file_signs_in_from_another_origin(browser: Browser, site: Site) -> None:
    """The file --open hands the browser (file://, another origin) signs it in: the Strict cookie goes with the
    page's own move to /, which then searches."""
    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        pg.goto(open_file(site.home, site.web.url).as_uri())
        expect(pg.locator("body")).to_have_attribute("data-ready", "yes")
        assert pg.url == site.web.base
        _search(pg, "duckdb lock")
        expect(pg.locator("#results li")).to_have_count(10)
    finally:
        ctx.close()


def _search(page: Page, query: str) -> None:
    page.fill("#q", query)
    page.click("#search-form button[type=submit]")


def _open_settings(page: Page) -> None:
    if page.locator("#settings").is_hidden():
        page.click("#settings-toggle")
    expect(page.locator("#settings")).to_be_visible()
    expect(page.locator("#settings")).to_have_attribute("data-loaded", "yes")


def test_search_highlights_and_pages_with_the_cursor(page: Page, site: Site) -> None:
    """A search lists highlighted hits; More results appends the next pages until none is left, no repeats."""
    _search(page, "duckdb lock")
    items = page.locator("#results li")
    expect(items).to_have_count(10)
    expect(page.locator("#results li mark").first).to_have_text("duckdb", ignore_case=True)
    # The transcript's own markup is text, never HTML.
    expect(page.locator("#results li .snippet b")).to_have_count(0)
    expect(page.locator("#results li .snippet").first).to_contain_text("<b>error</b>")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-search.png"), full_page=True)
    page.click("#more")
    expect(items).to_have_count(SESSIONS)
    expect(page.locator("#more")).to_be_hidden()
    ids = items.evaluate_all("els => els.map(e => e.dataset.session)")
    assert len(set(ids)) == SESSIONS
    expect(page.locator("#results li .hit-meta").first).to_contain_text("claude")
    expect(page.locator("#results li .resume").first).to_contain_text("claude --resume")


def test_a_session_opens_around_the_hit(page: Page, site: Site) -> None:
    """Clicking a hit shows its session with the matching message marked; earlier messages load above."""
    _search(page, "read-only handle kept the lock")
    page.locator("#results li").first.click()
    expect(page.locator("#session")).to_be_visible()
    hit = page.locator("#messages li.hit")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("read-only handle kept the lock")
    expect(page.locator("#messages li")).to_have_count(12)  # the window: the hit is the session's last message
    page.click("#earlier")
    expect(page.locator("#messages li")).to_have_count(18)  # 8 steps of two messages, the question, the answer
    expect(page.locator("#earlier")).to_be_hidden()
    assert page.locator("#messages li").first.get_attribute("data-position") == "0"


def test_consent_off_and_on_from_the_settings(page: Page, site: Site) -> None:
    """Unticking indexing saves enabled: false (status is not read while off); ticking it again turns it back on."""
    _open_settings(page)
    expect(page.locator("#enabled")).to_be_checked()
    expect(page.locator("#status-line")).to_contain_text("file(s) indexed")
    page.uncheck("#enabled")
    page.click("#save-policy")
    expect(page.locator("#status-line")).to_have_text("Indexing is off.")
    assert policy.load(site.home).enabled is False
    reads = page.locator("body").get_attribute("data-status-reads")
    # Closing and opening the pane reads the policy again, but not the status while indexing is off.
    page.click("#settings-toggle")
    page.click("#settings-toggle")
    expect(page.locator("#enabled")).not_to_be_checked()
    assert page.locator("body").get_attribute("data-status-reads") == reads
    page.check("#enabled")
    page.click("#save-policy")
    expect(page.locator("#status-line")).to_contain_text("file(s) indexed")
    assert policy.load(site.home).enabled is True
    expect(page.locator("body")).to_have_attribute("data-polling", "no")


def test_retention_is_changed_and_kept(page: Page, site: Site) -> None:
    """Keeping 30 days saves historyDays: 30; Keep all history saves null again."""
    _open_settings(page)
    page.uncheck("#keep-all")
    page.fill("#history-days", "30")
    page.click("#save-policy")
    expect(page.locator("body")).to_have_attribute("data-saved", "1")
    assert policy.load(site.home).history_days == 30
    page.reload()
    _open_settings(page)
    expect(page.locator("#history-days")).to_have_value("30")
    page.check("#keep-all")
    page.click("#save-policy")
    expect(page.locator("body")).to_have_attribute("data-saved", "1")
    assert policy.load(site.home).history_days is None


def test_clear_asks_first_then_rebuilds_and_polls_until_current(page: Page, site: Site) -> None:
    """Clear shows a confirmation (Cancel keeps the index); confirming replaces the index, and status is
    polled while it rebuilds and stops once it is current."""
    before = site.daemon.call("aiVault.indexStats")["identity"]
    _open_settings(page)
    page.click("#clear")
    expect(page.locator("#clear-confirm")).to_be_visible()
    page.click("#clear-no")
    expect(page.locator("#clear-confirm")).to_be_hidden()
    assert site.daemon.call("aiVault.indexStats")["identity"] == before
    page.click("#clear")
    page.click("#clear-yes")
    # The daemon answers once the old indexer is stopped and the new database made (the rebuild follows);
    # the page then forgets the old status (it said "current") and reads the new index's.
    expect(page.locator("body")).to_have_attribute("data-cleared", re.compile(".+"), timeout=90_000)
    cleared = page.locator("body").get_attribute("data-cleared")
    assert cleared and cleared != before
    expect(page.locator("body")).to_have_attribute("data-phase", "current", timeout=90_000)
    expect(page.locator("body")).to_have_attribute("data-polling", "no")
    # data-cleared is set once the new index's status has been read: a search now finds the rebuilt index.
    _search(page, "duckdb lock")
    expect(page.locator("#results li")).to_have_count(10)


def test_a_page_for_another_host_shows_no_controls(browser: Browser, site: Site) -> None:
    """Served for ssh:<target>, the settings are read-only and say why; searching reports the host unreachable."""
    web = WebProcess(site.home, "--host", "ssh:devbox")
    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        pg.goto(web.url)
        expect(pg.locator("#host-label")).to_have_text("host ssh:devbox")
        _open_settings(pg)
        expect(pg.locator("#settings-note")).to_contain_text("not offered here")
        expect(pg.locator("#enabled")).to_be_disabled()
        expect(pg.locator("#clear-box")).to_be_hidden()
        _search(pg, "duckdb")
        expect(pg.locator("#search-error")).to_contain_text("ssh:devbox")
    finally:
        ctx.close()
        web.stop()


def test_all_machines_shows_each_hits_host_and_a_line_per_failed_host(browser: Browser, tmp_path: Path) -> None:
    """The selector offers this machine, ssh:devbox and all machines; "All machines" lists both machines' hits,
    each with its host, and a hung host as a timeout line; a ssh:devbox hit is read on ssh:devbox."""
    machines = make_machines(tmp_path)
    add_hung(machines)
    web = WebProcess(machines.client, env={"HOME": str(machines.local.user)})
    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        pg.set_default_timeout(30_000)
        pg.goto(web.url)
        expect(pg.locator("body")).to_have_attribute("data-ready", "yes")
        expect(pg.locator("#host")).to_have_attribute("data-loaded", "yes")
        options = pg.locator("#host option").evaluate_all("els => els.map(e => [e.value, e.textContent])")
        assert options == [["local", "This machine"], [DEVBOX, DEVBOX], [HUNG, HUNG], ["all", "All machines"]]
        pg.select_option("#host", "all")
        _search(pg, "burrow")
        expect(pg.locator("#results li")).to_have_count(5)
        hosts = pg.locator("#results li .hit-host").all_text_contents()
        assert sorted(hosts) == ["local", "local", "local", DEVBOX, DEVBOX]
        expect(pg.locator(f'#host-report li[data-host="{HUNG}"]')).to_have_attribute("data-state", "timeout")
        expect(pg.locator("#host-report")).to_contain_text("Partial results")
        # A ssh:devbox hit is read on ssh:devbox: without a daemon the page reaches no remote host and says so
        # (tests/system/test_web.py reads one through the daemon).
        pg.locator(f'#results li[data-host="{DEVBOX}"]').first.click()
        expect(pg.locator("#session-error")).to_contain_text(f"no connection to execution host {DEVBOX}")
    finally:
        ctx.close()
        web.stop()
        remove_hung(machines)
