"""The command listener that stops this server's readers of a topic DROP ... DELETE TOPIC will delete.

Does no I/O of its own (``headwater.kafka.readers`` pauses consumers). Every server applies the DROP
from the command log; on applying it, each pauses its readers of the topic here, before its
``/status`` of the command says SUCCESS, so the server that then deletes the topic (after asking its
peers) deletes it under no fetching consumer (see ``headwater.kafka.readers`` for why that matters).
The retirement lapses after :data:`HOLD_S`, or as soon as a source reads a topic of that name again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from headwater.kafka import clients, readers
from headwater.kafka.clients import KafkaSettings
from headwater.metastore.catalog import Catalog
from headwater.metastore.records import CommandRecord
from headwater.metastore.replay import CommandState, Outcome

log = logging.getLogger(__name__)

#: How long a server keeps a dropped source's topic retired (the deletion follows within seconds).
HOLD_S = 60.0
#: How often a server looks whether a dropped source's topic is gone yet.
WATCH_INTERVAL_S = 0.1

Listener = Callable[[CommandRecord, Outcome, Catalog], None]


def deleted_topic(record: CommandRecord, outcome: Outcome) -> str | None:
    """The topic an applied command is about to have deleted (pure), if any."""
    if outcome.state is not CommandState.SUCCESS or record.kind != "drop_source":
        return None
    topic = record.command.get("delete_topic")
    return topic if isinstance(topic, str) and topic else None


def retiring(settings: KafkaSettings | None, then: Listener | None = None) -> Listener:
    """A command listener that retires deleted topics, then calls ``then``. Never raises.

    With ``settings``, a topic's deletion (by whichever server deletes it) is watched for, so that
    this server's readers that may hold it are renewed (``readers.note_deleted``).
    """
    watcher = None if settings is None else DeletionWatcher(settings)

    def listener(record: CommandRecord, outcome: Outcome, catalog: Catalog) -> None:
        try:
            topic = deleted_topic(record, outcome)
            if topic is not None:
                # Paused at once; consumers that knew the topic are then replaced by their owners
                # (the restorer within a poll), before a topic of that name may be created again
                # (kafka.readers). Never waited for here: the runner holds its lock.
                readers.retire([topic], wait=False, hold_s=HOLD_S)
                if watcher is not None:
                    watcher.watch(topic)
            elif readers.retired_topics():
                in_use = {source.topic for source in catalog.sources.values()}
                readers.release_holds(in_use & readers.retired_topics())
        except Exception:  # the runner must not die for this
            log.exception(
                "could not retire the topic of command %s",
                record.command_id,
                extra={"statement_id": record.command_id},
            )
        if then is not None:
            then(record, outcome, catalog)

    return listener


class DeletionWatcher:
    """Notes the deletion of dropped sources' topics once they are gone (``readers.note_deleted``).

    One thread and one admin client, there only while some topic is watched; each topic is looked up
    every :data:`WATCH_INTERVAL_S` for at most :data:`HOLD_S` (a command log replayed at start-up
    watches its old drops once: they are gone at the first look).
    """

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._watched: dict[str, float] = {}  # topic -> until when (monotonic)
        self._thread: threading.Thread | None = None

    def watch(self, topic: str) -> None:
        with self._lock:
            self._watched[topic] = time.monotonic() + HOLD_S
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="topic-deletion-watch", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        admin = clients.admin_client(self._settings, "topic-deletion-watch")
        while True:
            with self._lock:
                now = time.monotonic()
                self._watched = {t: until for t, until in self._watched.items() if until > now}
                if not self._watched:
                    self._thread = None
                    return
                watched = set(self._watched)
            try:
                gone = watched - set(admin.list_topics(timeout=WATCH_INTERVAL_S * 10).topics)
            except Exception as exc:  # noqa: BLE001 - Kafka unreachable: look again
                log.debug("looking for deleted topics: %s", exc)
                gone = set()
            if gone:
                readers.note_deleted(gone)
                with self._lock:
                    for topic in gone:
                        self._watched.pop(topic, None)
            time.sleep(WATCH_INTERVAL_S)
