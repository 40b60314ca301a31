"""ksqlDB's quickstart, typed as a new user would (through ``headwater run``, the shell's script
runner, against a real server with Spark): a stream of rider locations, a table of each rider's
latest location, a table of riders per distance from Mountain View over that table, inserts, pull
queries by key and by range; then a windowed count per minute queried by key and window."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

# ksqlDB's quickstart (https://ksqldb.io/quickstart.html), unchanged but for the topic name (the
# test broker is shared) and the push query, which is issue 16's.
QUICKSTART = """
CREATE STREAM riderLocations (profileId VARCHAR, latitude DOUBLE, longitude DOUBLE)
  WITH (kafka_topic='locations_{suffix}', value_format='json', partitions=1);

CREATE TABLE currentLocation AS
  SELECT profileId,
         LATEST_BY_OFFSET(latitude) AS la,
         LATEST_BY_OFFSET(longitude) AS lo
  FROM riderlocations
  GROUP BY profileId
  EMIT CHANGES;

CREATE TABLE ridersNearMountainView AS
  SELECT ROUND(GEO_DISTANCE(la, lo, 37.4133, -122.1162), -1) AS distanceInMiles,
         COLLECT_LIST(profileId) AS riders,
         COUNT(*) AS count
  FROM currentLocation
  GROUP BY ROUND(GEO_DISTANCE(la, lo, 37.4133, -122.1162), -1);

INSERT INTO riderLocations (profileId, latitude, longitude) VALUES ('c2309eec', 37.7877, -122.4205);
INSERT INTO riderLocations (profileId, latitude, longitude) VALUES ('18f4ea86', 37.3903, -122.0643);
INSERT INTO riderLocations (profileId, latitude, longitude) VALUES ('4ab5cbad', 37.3952, -122.0813);
INSERT INTO riderLocations (profileId, latitude, longitude) VALUES ('8b6eae59', 37.3944, -122.0813);
INSERT INTO riderLocations (profileId, latitude, longitude) VALUES ('4a7c7b41', 37.4049, -122.0822);
INSERT INTO riderLocations (profileId, latitude, longitude) VALUES ('4ddad000', 37.7857, -122.4011);
"""


def _run(url: str, *args: str) -> Any:
    exe = Path(sys.executable).with_name("headwater")
    done = subprocess.run(
        [str(exe), "run", "-s", url, "-o", "json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _rows(url: str, sql: str) -> list[list[Any]]:
    """A pull query's rows, as ``headwater run -o json`` prints them."""
    printed = json.loads(_run(url, "-e", sql))
    return [list(row.values()) for row in printed["rows"]]


def _eventually(url: str, sql: str, wanted: Any, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    while (found := _rows(url, sql)) != wanted and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def test_ksqldb_quickstart_through_the_script_runner(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"qs_{suffix}",
    )
    script = tmp_path / "quickstart.sql"
    script.write_text(QUICKSTART.format(suffix=suffix))
    _run(server.url, "-f", str(script))

    found = _eventually(
        server.url,
        "SELECT * from currentLocation WHERE profileId = '4ab5cbad';",
        [["4ab5cbad", 37.3952, -122.0813]],
    )
    assert found == [["4ab5cbad", 37.3952, -122.0813]]
    near = [[0.0, ["4ab5cbad", "8b6eae59", "4a7c7b41"], 3], [10.0, ["18f4ea86"], 1]]
    found = _eventually(
        server.url, "SELECT * from ridersNearMountainView WHERE distanceInMiles <= 10;", near
    )
    assert found == near

    # A new location for a rider moves it between distances (the table over a table undoes it).
    _run(
        server.url,
        "-e",
        "INSERT INTO riderLocations (profileId, latitude, longitude) VALUES "
        "('4ab5cbad', 37.7877, -122.4205);",
    )
    near = [[0.0, ["8b6eae59", "4a7c7b41"], 2], [10.0, ["18f4ea86"], 1]]
    assert (
        _eventually(
            server.url, "SELECT * from ridersNearMountainView WHERE distanceInMiles <= 10;", near
        )
        == near
    )

    # A windowed count per minute, queried by key and window.
    _run(
        server.url,
        "-e",
        "CREATE TABLE ridesPerMinute AS SELECT profileId, COUNT(*) AS rides "
        "FROM riderLocations WINDOW TUMBLING (SIZE 1 MINUTE) "
        "GROUP BY profileId;",
    )
    minute = int(time.time() * 1000) // 60_000 * 60_000
    for ts in (minute + 1_000, minute + 2_000):
        _run(
            server.url,
            "-e",
            f"INSERT INTO riderLocations (ROWTIME, profileId, latitude, "
            f"longitude) VALUES ({ts}, 'w1', 37.4, -122.1);",
        )
    wanted = [["w1", minute, minute + 60_000, 2]]
    assert (
        _eventually(
            server.url,
            f"SELECT * FROM ridesPerMinute WHERE profileId = 'w1' AND "
            f"WINDOWSTART >= {minute} AND WINDOWSTART < {minute + 60_000};",
            wanted,
        )
        == wanted
    )
