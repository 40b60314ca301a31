"""Catalog snapshots in the state dir, so start-up replays only the tail of the command log.

Does I/O (local files). A snapshot holds the folded state after a known log position: the catalog,
the position, and the outcome of every command id decided (executors never apply one id twice, and
submitters look ids up). Files are written to a temporary name, fsynced, then renamed, so a crash
leaves either the old snapshot or the new one; the newest readable one wins on load, and the two
newest are kept.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from headwater.metastore.codec import catalog_from_dict, catalog_to_dict
from headwater.metastore.replay import CommandState, Fold, LogPosition, Outcome

log = logging.getLogger(__name__)

_PREFIX = "catalog-"
_SUFFIX = ".json"
_KEEP = 2


class SnapshotStore:
    """The snapshot files of one server, in ``<state dir>/catalog/``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def save(self, fold: Fold) -> Path:
        """Write a snapshot of ``fold`` and prune older ones."""
        self.folder.mkdir(parents=True, exist_ok=True)
        body = {
            "catalog": catalog_to_dict(fold.catalog),
            "nextOffset": fold.position.next_offset,
            "lastRecordOffset": fold.position.last_record_offset,
            "outcomes": [
                [o.command_id, o.offset, o.state.value, o.message, o.conflict]
                for o in fold.outcomes.values()
            ],
        }
        path = self.folder / f"{_PREFIX}{fold.position.next_offset:020d}{_SUFFIX}"
        temporary = path.with_suffix(".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            json.dump(body, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        self._fsync_folder()
        for old in self._files()[:-_KEEP]:
            old.unlink(missing_ok=True)
        return path

    def load(self) -> Fold | None:
        """The newest readable snapshot, or None when there is none."""
        for path in reversed(self._files()):
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
                outcomes = {
                    cid: Outcome(cid, offset, CommandState(state), message, conflict)
                    for cid, offset, state, message, conflict in body["outcomes"]
                }
                position = LogPosition(body["nextOffset"], body["lastRecordOffset"])
                return Fold(catalog_from_dict(body["catalog"]), position, outcomes)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable catalog snapshot %s: %s", path, exc)
        return None

    def _files(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(
            p for p in self.folder.iterdir() if p.name.startswith(_PREFIX) and p.suffix == _SUFFIX
        )

    def _fsync_folder(self) -> None:
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
