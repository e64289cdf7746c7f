"""The web console in a real browser (Debian's Chromium, headless) against a real settee process: signing in, the
overview, the buckets' live charts, the latency view, the document editor (checked through the official SDK) and
the query workbench. Assertions read what the page shows and the data attributes it exposes (a chart's
`data-points`), never pixels."""

from __future__ import annotations

import json

from conftest import sign_in

DOC_KEY = "console-doc"


def test_wrong_password_shows_an_error_and_no_data(page, server):
    # Proves a wrong password is refused with the page's own message, the views stay hidden, and the right
    # password then gets in. (That the 401 carries no Basic challenge, which would open a headed browser's login
    # dialog, is proven by the unit test rest::console::a_failed_login_from_the_console_gets_no_browser_challenge:
    # headless Chromium shows no dialog either way.)
    sign_in(page, server, password="not-the-password")
    page.wait_for_selector("#login-error:has-text('Wrong user name or password.')")
    assert page.is_hidden("#view") and page.is_hidden("#nav")
    page.fill("#login-password", "password")
    page.click("#login-submit")
    page.wait_for_selector("#nodes-table")
    assert page.text_content("#whoami") == "Administrator"


def test_overview_shows_the_node_and_the_bucket(page, server, collection):
    # Proves the overview lists this node as healthy with its services, and the buckets view lists `default`
    # with the items the SDK wrote.
    for i in range(20):
        collection.upsert(f"overview-{i}", {"i": i})
    sign_in(page, server)
    row = page.wait_for_selector(f"#nodes-table tr[data-node='{server.mgmt_addr}']")
    text = row.text_content()
    assert "healthy" in text and "kv, n1ql" in text, text
    page.goto(f"{server.mgmt_url}/ui/index.html#/buckets")
    page.wait_for_function(
        "() => Number(document.querySelector(\"tr[data-bucket='default'] [data-items]\")?.dataset.items) >= 20")


def test_bucket_charts_draw_live_data(page, server, collection):
    # Proves the ops/s chart draws the stats endpoint's samples after load, including the writes just made, and
    # the latency chart gets a point from the timings endpoint.
    for i in range(200):
        collection.upsert(f"chart-{i}", {"i": i})
    sign_in(page, server)
    page.goto(f"{server.mgmt_url}/ui/index.html#/buckets?bucket=default")
    page.wait_for_function(
        "() => { const c = document.getElementById('chart-ops');"
        " return c && Number(c.dataset.points) >= 2 && Number(c.dataset.max) > 0; }")
    page.wait_for_function("() => Number(document.getElementById('chart-latency')?.dataset.points) >= 1")
    points = int(page.get_attribute("#chart-ops", "data-points"))
    assert points >= 2


def test_latency_view_shows_percentiles_per_node(page, server, collection):
    # Proves the per-node latency table lists the SET commands the SDK ran, with a count and percentiles.
    collection.upsert("latency-doc", {"x": 1})
    sign_in(page, server)
    page.goto(f"{server.mgmt_url}/ui/index.html#/latency")
    row = page.wait_for_selector(f"tr[data-scope='{server.mgmt_addr}'][data-bucket='default'][data-op='SET']")
    cells = [c.text_content() for c in row.query_selector_all("td")]
    assert int(cells[2].replace(",", "")) >= 1, cells
    assert any(c.endswith("µs") or c.endswith("ms") for c in cells[3:]), cells


def test_a_document_edited_in_the_browser_reads_back_through_the_sdk(page, server, collection):
    # Proves the document editor's round trip: the SDK writes a document, the browser looks it up, edits its JSON
    # and saves it, and the SDK reads the new value.
    collection.upsert(DOC_KEY, {"name": "before", "n": 1})
    sign_in(page, server)
    page.goto(f"{server.mgmt_url}/ui/index.html#/documents?bucket=default")
    page.wait_for_selector("#doc-collection option[value='_default']", state="attached")
    page.fill("#doc-key", DOC_KEY)
    page.click("#doc-lookup")
    page.wait_for_selector(f"#doc-status:has-text('Loaded {DOC_KEY}.')")
    assert json.loads(page.input_value("#doc-editor")) == {"name": "before", "n": 1}
    page.fill("#doc-editor", json.dumps({"name": "after", "n": 2, "tags": ["edited"]}))
    page.click("#doc-save")
    page.wait_for_selector(f"#doc-status:has-text('Saved {DOC_KEY}.')")
    assert collection.get(DOC_KEY).content_as[dict] == {"name": "after", "n": 2, "tags": ["edited"]}
    page.fill("#doc-key", "no-such-doc")
    page.click("#doc-lookup")
    page.wait_for_selector("#doc-error:has-text('No document no-such-doc')")


def test_invalid_json_is_not_saved(page, server, collection):
    # Proves the editor refuses text that is not JSON and the stored document is unchanged.
    collection.upsert("json-doc", {"ok": True})
    sign_in(page, server)
    page.goto(f"{server.mgmt_url}/ui/index.html#/documents?bucket=default&key=json-doc")
    page.wait_for_selector("#doc-status:has-text('Loaded json-doc.')")
    page.fill("#doc-editor", "{not json")
    page.click("#doc-save")
    page.wait_for_selector("#doc-error:has-text('Not JSON')")
    assert collection.get("json-doc").content_as[dict] == {"ok": True}


def test_query_workbench_returns_rows_and_keys_list_after_a_primary_index(page, server, collection):
    # Proves the workbench runs statements through the management port's query proxy (rows shown and counted),
    # that listing keys without a primary index says so, and that after CREATE PRIMARY INDEX in the workbench the
    # document browser lists the collection's keys.
    collection.upsert("query-doc", {"name": "queried"})
    sign_in(page, server)
    page.goto(f"{server.mgmt_url}/ui/index.html#/query")
    page.fill("#query-editor", 'SELECT d.name FROM `default` AS d USE KEYS "query-doc"')
    page.click("#query-run")
    page.wait_for_selector("#query-result[data-rows='1']")
    assert json.loads(page.text_content("#query-result")) == [{"name": "queried"}]

    page.goto(f"{server.mgmt_url}/ui/index.html#/documents?bucket=default")
    page.wait_for_selector("#doc-collection option[value='_default']", state="attached")
    page.click("#doc-list")
    page.wait_for_selector("#doc-error:has-text('has no primary index')")

    page.goto(f"{server.mgmt_url}/ui/index.html#/query")
    page.fill("#query-editor", "CREATE PRIMARY INDEX ON `default`")
    page.click("#query-run")
    page.wait_for_selector("#query-status:has-text('success')")
    page.goto(f"{server.mgmt_url}/ui/index.html#/documents?bucket=default")
    page.wait_for_selector("#doc-collection option[value='_default']", state="attached")
    page.click("#doc-list")
    page.wait_for_selector("#doc-keys li[data-key]")
    page.click("#doc-keys li[data-key='chart-0']" if page.query_selector("#doc-keys li[data-key='chart-0']")
               else "#doc-keys li[data-key]")
    page.wait_for_selector("#doc-status:has-text('Loaded')")


def test_collections_and_users_views_list_the_cluster(page, server):
    # Proves the scopes view lists the default collection and the security view the administrator's roles.
    sign_in(page, server)
    page.goto(f"{server.mgmt_url}/ui/index.html#/collections")
    page.wait_for_selector("tr[data-keyspace='_default._default']")
    page.goto(f"{server.mgmt_url}/ui/index.html#/security")
    page.wait_for_selector("#roles table")
