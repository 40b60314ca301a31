"""The web console in a real browser: Debian's Chromium (/usr/bin/chromium) driven by Playwright,
on one ``headwater server`` with BASIC logins that the module's tests share.

What a user does: logs in, declares a stream and a table, inserts rows, reads the table with a pull
query (and sees where each partition was served from, with its lag), tails the stream with a push
query while another INSERT arrives, stops it, walks the history and completes names from the
keyboard, starts a persistent query and watches its state go from PENDING to RUNNING in the
sidebar, draws its plan, and reads the cluster view. Without the browser or Playwright the tests
fail saying what to install (never a skip). A failing test leaves a screenshot and the page's
HTML in its tmp_path and prints where.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
USER, PASSWORD = "ada", "console pass"
WAIT_MS = 20_000


def _sync_playwright() -> Any:
    """Playwright's sync API, or a failure saying what is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the console's browser tests need Playwright for Python: .venv/bin/pip install "
            "playwright (it is in pyproject's test extra; never `playwright install`: the "
            "tests drive Debian's Chromium)",
            pytrace=False,
        )
    if not CHROMIUM.exists():
        pytest.fail(
            f"the console's browser tests need Debian's Chromium at {CHROMIUM}: "
            "apt-get install -y chromium (.ci/run installs it)",
            pytrace=False,
        )
    return sync_playwright


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium for the module (each test gets a fresh context: no shared state)."""
    sync_playwright = _sync_playwright()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def server(
    memory_broker: EmbeddedBroker,
    module_server_factory: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    """A server with BASIC logins; Spark starts with it (warmed up while the first tests run)."""
    users = tmp_path_factory.mktemp("console-users") / "users.properties"
    users.write_text(f"{USER}: {PASSWORD},user\n", encoding="utf-8")
    server = module_server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"console-{uuid.uuid4().hex[:8]}",
        "--set",
        "authentication.method=BASIC",
        "--set",
        f"authentication.basic.credentials.file={users}",
        "--set",
        "headwater.engine.start=startup",
    )
    server.auth = (USER, PASSWORD)
    return server


@pytest.fixture
def page(
    browser: Any, server: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Any]:
    """The console, logged in, in a fresh browser context; a failure keeps a screenshot."""
    context = browser.new_context(
        http_credentials={"username": USER, "password": PASSWORD},
        viewport={"width": 1280, "height": 860},
    )
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    failed_before = request.session.testsfailed
    try:
        answer = opened.goto(f"{server.url}/")
        assert answer is not None and answer.status == 200
        opened.locator("#refreshed", has_text="refreshed").wait_for()
        yield opened
        assert not errors, f"the page's script failed: {errors}"
    finally:
        if request.session.testsfailed > failed_before:
            shot = tmp_path / "console-failure.png"
            opened.screenshot(path=str(shot), full_page=True)
            (tmp_path / "console-failure.html").write_text(opened.content(), encoding="utf-8")
            print(f"console screenshot of the failure: {shot}")
        context.close()


def _run(page: Any, sql: str) -> Any:
    """Type ``sql`` into the editor and run it with Ctrl+Enter; its (first) result card."""
    editor = page.locator("#editor")
    editor.fill(sql)
    editor.press("Control+Enter")
    return _card(page, sql.split(";")[0])


def _expect(locator: Any) -> Any:
    from playwright.sync_api import expect  # the fixtures checked that it imports

    return expect(locator)


def _card(page: Any, statement: str) -> Any:
    return (
        page.locator("#results .card")
        .filter(has=page.locator("pre.stmt", has_text=statement))
        .first
    )


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:6].upper()
    return f"CLICKS_{suffix}", f"USERS_{suffix}"


def test_without_credentials_the_browser_is_asked_for_a_login(browser: Any, server: Any) -> None:
    """The console answers 401 with a Basic challenge (a browser then asks for a login; headless
    Chromium, with nobody to ask, gives the navigation up)."""
    from playwright.sync_api import Error

    context = browser.new_context()
    try:
        page = context.new_page()
        with (
            page.expect_response(f"{server.url}/") as challenged,
            pytest.raises(Error, match="ERR_INVALID_AUTH_CREDENTIALS"),
        ):
            page.goto(f"{server.url}/")
        assert challenged.value.status == 401
        assert challenged.value.headers["www-authenticate"].startswith("Basic realm=")
        assert context.request.get(f"{server.url}/console/console.js").status == 401
    finally:
        context.close()


def test_statements_pull_and_push_queries(page: Any, server: Any) -> None:
    clicks, users = _names()
    created = _run(
        page,
        f"CREATE STREAM {clicks} (user_id STRING KEY, url STRING) WITH "
        f"(kafka_topic='{clicks.lower()}', partitions=2, value_format='JSON');\n"
        f"CREATE TABLE {users} (id STRING PRIMARY KEY, name STRING, age INT) WITH "
        f"(kafka_topic='{users.lower()}', partitions=2, value_format='JSON');",
    )
    created.locator("p.ok", has_text="Table created").wait_for()
    page.locator(f"#list-streams li[data-name='{clicks}']").wait_for()
    page.locator(f"#list-tables li[data-name='{users}']").wait_for()

    inserted = _run(page, f"INSERT INTO {users} (id, name, age) VALUES ('alice', 'Alice', 30);")
    inserted.locator("p.ok", has_text="Inserted a row").wait_for()
    pull = _run(page, f"SELECT * FROM {users} WHERE id = 'alice';")
    _expect(pull).to_have_attribute("data-status", re.compile("done|failed"))
    assert pull.get_attribute("data-status") == "done", pull.inner_text()
    assert pull.locator("table.rows tbody tr").all_inner_texts() == ["alice\tAlice\t30"]
    served = pull.locator(".staleness tbody tr")
    assert served.count() == 1  # a key lookup reads the key's partition
    _partition, host, position, lag = served.first.locator("td").all_inner_texts()
    assert host == server.host and int(position) >= 1 and lag == "0"

    push = _run(page, f"SELECT url FROM {clicks} WHERE user_id = 'bob' EMIT CHANGES;")
    _expect(push).to_have_attribute("data-status", "running")
    assert push.locator("table.rows tbody tr").count() == 0
    _run(page, f"INSERT INTO {clicks} (user_id, url) VALUES ('bob', '/pricing');")
    push.locator("table.rows tbody tr", has_text="/pricing").wait_for()
    assert push.locator("p.count").inner_text() == "1 row received"

    push.locator("button.stop").click()
    _expect(push).to_have_attribute("data-status", "stopped")
    deadline = time.monotonic() + 10
    while True:  # the server ends it within a poll of its consumer
        listed = server.ksql("SHOW QUERIES;").json()[0]["queries"]
        pushes = [q for q in listed if q["queryType"] == "PUSH"]
        if not pushes:
            break
        assert time.monotonic() < deadline, f"Stop did not close the push query: {pushes}"
        time.sleep(0.1)

    failed = _run(page, f"SELECT * FROM NO_SUCH_{users};")
    failed.locator(".error").wait_for()
    assert "does not exist" in failed.locator(".error .message").inner_text()
    wrong = _run(page, "SHOW STREAMS;\nDESCRIBE NO_SUCH_THING;")
    assert "Could not find STREAM/TABLE" in wrong.locator(".error .message").inner_text()
    assert wrong.locator(".error .where").inner_text().startswith("line 2, column")
    assert wrong.locator("table").count() == 1, "the statement before the failing one is shown"


def test_history_and_completion_from_the_keyboard(page: Any, server: Any) -> None:
    clicks, _ = _names()
    created = server.ksql(
        f"CREATE STREAM {clicks} (user_id STRING KEY, url STRING) WITH "
        f"(kafka_topic='{clicks.lower()}', partitions=1, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    page.locator(f"#list-streams li[data-name='{clicks}']").wait_for()
    editor = page.locator("#editor")
    editor.fill("")
    editor.press_sequentially(f"DESCRIBE {clicks[:-2]}")
    popup = page.locator("#complete")
    popup.locator("li", has_text=clicks).wait_for()
    editor.press("Tab")
    assert editor.input_value() == f"DESCRIBE {clicks}"
    editor.press_sequentially(";")
    editor.press("Control+Enter")
    described = _card(page, f"DESCRIBE {clicks};")
    assert described.locator(".source h3").inner_text() == clicks
    assert "URL" in described.locator(".source table").inner_text()

    editor.fill("sho")
    popup.locator("li", has_text="SHOW").wait_for()
    editor.press("Enter")  # accepts, in the case typed
    assert editor.input_value() == "show"
    editor.press_sequentially(" tables;")
    editor.press("Control+Enter")
    _card(page, "show tables;").locator("table").wait_for()

    editor.fill("")
    editor.press("ArrowUp")
    assert editor.input_value() == "show tables;"
    editor.press("ArrowUp")
    assert editor.input_value() == f"DESCRIBE {clicks};"
    editor.press("ArrowDown")
    editor.press("ArrowDown")
    assert editor.input_value() == ""
    stored = page.evaluate("JSON.parse(localStorage.getItem('headwater.console.history'))")
    assert stored[-2:] == [f"DESCRIBE {clicks};", "show tables;"]


def test_a_persistent_query_in_the_sidebar_its_plan_and_the_cluster(page: Any, server: Any) -> None:
    clicks, users = _names()
    big = f"{clicks}_BIG"
    for sql in (
        f"CREATE STREAM {clicks} (user_id STRING KEY, url STRING) WITH (kafka_topic="
        + f"'{clicks.lower()}', partitions=1, value_format='JSON');",
        f"CREATE TABLE {users} (id STRING PRIMARY KEY, name STRING) WITH (kafka_topic="
        + f"'{users.lower()}', partitions=2, value_format='JSON');",
    ):
        assert server.ksql(sql).status_code == 200
    page.evaluate(  # every state the sidebar shows, in order
        """() => { window.seenStates = [];
        new MutationObserver(() => document.querySelectorAll('#list-queries li[data-state]')
          .forEach((li) => { const s = li.dataset.state;
            if (window.seenStates.at(-1) !== s) window.seenStates.push(s); }))
          .observe(document.getElementById('list-queries'), {childList: true, subtree: true}); }"""
    )
    created = _run(  # from the beginning: the record below counts whenever the query starts
        page,
        "SET 'auto.offset.reset' = 'earliest';\n"
        f"CREATE STREAM {big} AS SELECT user_id, UCASE(url) AS url FROM {clicks} EMIT CHANGES;",
    )
    assert "Set 'auto.offset.reset' = 'earliest'" in created.inner_text()
    created = _card(page, f"CREATE STREAM {big}")
    message = created.locator("p.ok", has_text="Stream created").inner_text()
    query_id = re.search(r"query ID: (\S+)", message)
    assert query_id, message
    _run(page, f"INSERT INTO {clicks} (user_id, url) VALUES ('ann', '/docs');")
    query = page.locator(f"#list-queries li[data-query-id='{query_id[1]}']")
    started = time.monotonic()
    query.locator(".badge", has_text="RUNNING").wait_for(timeout=120_000)  # Spark, loaded CI
    print(f"PENDING to RUNNING in the sidebar: {time.monotonic() - started:.1f} s")
    seen = [s for s in page.evaluate("window.seenStates") if s != "UNKNOWN"]
    assert seen[:1] == ["PENDING"] and seen[-1] == "RUNNING", seen
    query.locator(".muted", has_text="1 records written").wait_for(timeout=30_000)

    query.locator("button.link").click()
    plan = _card(page, f"EXPLAIN {query_id[1]};")
    boxes = plan.locator("svg.plan g.node")
    boxes.last.wait_for()
    titles = [box.locator("title").text_content() for box in boxes.all()]
    assert [t.split(" ")[0] for t in titles] == [clicks, query_id[1], big], titles
    assert "RUNNING" in titles[1]
    assert plan.locator("svg.plan line.edge").count() == 2

    page.locator("#tab-cluster").click()
    host = page.locator(f"#cluster section.host[data-host='{server.host}']")
    host.locator(".badge", has_text="alive").wait_for()
    host.locator("tbody tr", has_text=users).nth(1).wait_for()
    rows = [r.split("\t") for r in host.locator("tbody tr", has_text=users).all_inner_texts()]
    assert [(r[1], r[2]) for r in rows] == [("0", "active"), ("1", "active")]
    assert all(r[5] == "0" for r in rows), rows
    # a flat line (every lag 0) has no height: attached, not "visible"
    page.locator("#lag-chart svg.lags polyline").first.wait_for(state="attached")
