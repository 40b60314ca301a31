"""The ksqlDB quickstart and its cleanup, again and again on one in-memory node: 0 crashes.

Issue 28, finding 1: an ``--in-memory`` node running the quickstart's two CREATE TABLE ... AS SELECT,
then ``TERMINATE CTAS_RIDERSNEARMOUNTAINVIEW_n; DROP TABLE ridersNearMountainView DELETE TOPIC;
TERMINATE CTAS_CURRENTLOCATION_n;`` died of SIGSEGV 3 times of 3. Each repetition here runs that
recipe with the quickstart's own names and topics (so every repetition after the first creates again
the topics the previous one deleted, the broker's second hazard), checks the node answered every
statement and the tables served the inserted riders, and drops everything with DELETE TOPIC.

    python -m bench.drop_cleanup [--repetitions 50] [--json]

Prints each repetition's seconds and the figures beside their targets; exits 1 when a target is not
met. Starts one ``headwater server --in-memory`` and always stops it (and its Spark) by pid.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.node import Server, versions

RIDERS = [
    ("c2309eec", 37.7877, -122.4205),
    ("18f4ea86", 37.3903, -122.0643),
    ("4ab5cbad", 37.3952, -122.0813),
    ("8b6eae59", 37.3944, -122.0813),
    ("4a7c7b41", 37.4049, -122.0822),
    ("4ddad000", 37.7857, -122.4011),
]
CREATE = [
    (
        "CREATE STREAM riderLocations (profileId VARCHAR, latitude DOUBLE, longitude DOUBLE) "
        "WITH (kafka_topic='locations', value_format='json', partitions=1);"
    ),
    (
        "CREATE TABLE currentLocation AS SELECT profileId, LATEST_BY_OFFSET(latitude) AS la, "
        "LATEST_BY_OFFSET(longitude) AS lo FROM riderlocations GROUP BY profileId EMIT CHANGES;"
    ),
    (
        "CREATE TABLE ridersNearMountainView AS SELECT ROUND(GEO_DISTANCE(la, lo, 37.4133, -122.1162), "
        "-1) AS distanceInMiles, COLLECT_LIST(profileId) AS riders, COUNT(*) AS count FROM "
        "currentLocation GROUP BY ROUND(GEO_DISTANCE(la, lo, 37.4133, -122.1162), -1);"
    ),
]
#: The queries read from the beginning of the stream (the riders are inserted after the CTAS).
EARLIEST = {"auto.offset.reset": "earliest"}


def _ksql(client: httpx.Client, url: str, text: str) -> list[dict[str, Any]]:
    answer = client.post(f"{url}/ksql", json={"ksql": text, "streamsProperties": EARLIEST})
    if answer.status_code != 200:
        raise RuntimeError(f"{text[:60]}...: {answer.status_code} {answer.text[:300]}")
    result: list[dict[str, Any]] = answer.json()
    return result


def _rows(client: httpx.Client, url: str, sql: str) -> list[Any]:
    answer = client.post(f"{url}/query", json={"ksql": sql})
    if answer.status_code != 200:
        return []
    return [item["row"]["columns"] for item in answer.json() if "row" in item]


def _query_ids(client: httpx.Client, url: str) -> dict[str, str]:
    """{sink name: query id} of the running persistent queries."""
    queries = _ksql(client, url, "SHOW QUERIES;")[0]["queries"]
    return {query["sinks"][0]: query["id"] for query in queries}


def repetition(client: httpx.Client, server: Server, timeout_s: float) -> float:
    """One quickstart and cleanup; returns its seconds. Raises if the node failed at any step."""
    started = time.monotonic()
    url = server.url
    for text in CREATE:
        _ksql(client, url, text)
    for rider, latitude, longitude in RIDERS:
        _ksql(
            client,
            url,
            f"INSERT INTO riderLocations (profileId, latitude, longitude) "
            f"VALUES ('{rider}', {latitude}, {longitude});",
        )
    deadline = time.monotonic() + timeout_s
    while len(_rows(client, url, "SELECT * FROM currentLocation;")) < len(RIDERS) or not _rows(
        client, url, "SELECT * FROM ridersNearMountainView;"
    ):
        server.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the quickstart's tables did not fill within {timeout_s:g} s")
        time.sleep(0.5)
    ids = _query_ids(client, url)
    _ksql(client, url, f"TERMINATE {ids['RIDERSNEARMOUNTAINVIEW']};")
    _ksql(client, url, "DROP TABLE ridersNearMountainView DELETE TOPIC;")
    _ksql(client, url, f"TERMINATE {ids['CURRENTLOCATION']};")
    _ksql(client, url, "DROP TABLE currentLocation DELETE TOPIC;")
    _ksql(client, url, "DROP STREAM riderLocations DELETE TOPIC;")
    time.sleep(1.0)  # a crash follows a deletion within a fetch or two
    server.check()
    if client.get(f"{url}/info").status_code != 200:
        raise RuntimeError("/info did not answer after the cleanup")
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.drop_cleanup", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        help="seconds one repetition's tables may take to fill",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    print(versions(), flush=True)
    seconds: list[float] = []
    failure = ""
    with tempfile.TemporaryDirectory(prefix="drop-cleanup-") as folder:
        log_path = Path(folder) / "server.log"
        with Server(["--in-memory"], log_path) as server, httpx.Client(timeout=60) as client:
            server.wait_healthy()
            for number in range(1, args.repetitions + 1):
                try:
                    seconds.append(repetition(client, server, args.timeout))
                except (RuntimeError, TimeoutError, httpx.HTTPError) as exc:
                    failure = f"repetition {number}: {exc}\n{server.log_tail(30)}"
                    break
                print(f"repetition {number}: {seconds[-1]:.1f} s", flush=True)
            exited = server.process.poll()
        # the Spark child is the server's to restart: a death there (a consumer of a deleted
        # topic, on the embedded broker) kills the queries, not the node, and is a crash all the same
        engine_deaths = sum(
            1
            for line in log_path.read_text(errors="replace").splitlines()
            if "the Spark engine process" in line and "died" in line
        )
    crashes = 0 if exited is None else 1
    figures = {
        "repetitions": args.repetitions,
        "completed": len(seconds),
        "server exits": crashes,
        "Spark engine deaths": engine_deaths,
        "median seconds": sorted(seconds)[len(seconds) // 2] if seconds else None,
    }
    met = crashes == 0 and engine_deaths == 0 and len(seconds) == args.repetitions
    if args.json:
        print(json.dumps({**figures, "met": met, "failure": failure}))
    else:
        print(f"{'figure':<22}{'value':>10}  target")
        print(f"{'completed':<22}{len(seconds):>10}  {args.repetitions}")
        print(f"{'server exits':<22}{crashes:>10}  0")
        print(f"{'Spark engine deaths':<22}{engine_deaths:>10}  0")
        if failure:
            print(f"FAILED at {failure}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
