"""Fixtures of the web console's browser tests: one real `settee server` process (started as the SDK suite starts
it, tests/compat/python/settee_server.py), the official Python SDK on it, and Debian's Chromium driven headless by
Playwright, with a fresh profile and no outbound connections of its own.

Screenshots go to $SETTEE_CONSOLE_OUT, else tests/console/output/ (ignored by git).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "compat" / "python"))

import settee_server  # noqa: E402
from sdk_connect import connect  # noqa: E402

CHROMIUM = os.environ.get("SETTEE_CHROMIUM", "/usr/bin/chromium")
# Without these flags Chromium tries to reach Google's services, which a closed network refuses.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# How long the page may take for anything the tests wait on (a chart fills within a few refreshes).
PAGE_TIMEOUT_MS = 20_000


@pytest.fixture(scope="session")
def output_dir() -> Path:
    out = Path(os.environ.get("SETTEE_CONSOLE_OUT", HERE / "output"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    base = Path(tmp_path_factory.mktemp("settee-console"))
    srv = settee_server.new_server(base, bucket_type="couchbase")
    srv.start()
    print(f"\nsettee: kv={srv.kv_port} mgmt={srv.mgmt_port} query={srv.query_port} log={srv.log_path}")
    yield srv
    code = srv.stop()
    if code not in (0, -15):
        print(f"\nsettee exited with {code}; log tail:\n{srv.log_tail()}")


@pytest.fixture(scope="session")
def collection(server):
    """The `default` bucket's default collection through the official SDK."""
    cluster = connect(server)
    cluster.wait_until_ready(timedelta(seconds=20))
    yield cluster.bucket(settee_server.BUCKET).default_collection()
    cluster.close()


@pytest.fixture(scope="session")
def browser_context():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's `chromium` (scripts/test-console.sh does)")
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="settee-chromium-")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900})
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context, output_dir, request):
    """A fresh tab (sessionStorage is per tab, so each test signs in itself); a screenshot is saved at the end,
    named after the test, pass or fail. Errors the page's scripts throw fail the test."""
    pg = browser_context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.screenshot(path=str(output_dir / f"{request.node.name}.png"), full_page=True)
    pg.close()
    assert not errors, f"the page threw: {errors}"


def sign_in(page, server, user=settee_server.USERNAME, password=settee_server.PASSWORD):
    page.goto(f"{server.mgmt_url}/ui/index.html")
    page.fill("#login-user", user)
    page.fill("#login-password", password)
    page.click("#login-submit")
