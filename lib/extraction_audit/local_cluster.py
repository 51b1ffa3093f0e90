"""Leftovers of ``local-cluster[...]`` masters (separate executor JVMs on one machine).

The in-process standalone worker of such a master gives each executor a folder under
``$SPARK_HOME/work/<app id>/`` holding a copy of every jar the session ships (about 85 MB
per executor with the Delta jars) and the executor's stdout/stderr, and never deletes it:
each run left 171 MB inside the pyspark package.  ``sweep`` removes the folders of
applications whose executors are gone.  An executor runs with its folder as working
directory, so a folder that is no live process's working directory belongs to a finished
(or killed) application; that test needs ``/proc`` (Linux), elsewhere nothing is removed.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def work_dir() -> Path:
    """Where the local worker puts executor folders: ``$SPARK_HOME/work``."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        from pyspark.find_spark_home import _find_spark_home

        home = _find_spark_home()
    return Path(home) / "work"


def _live_working_dirs() -> set[Path] | None:
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    dirs = set()
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                dirs.add(Path(os.readlink(entry / "cwd")))
            except OSError:  # gone meanwhile, or another user's process
                continue
    return dirs


def sweep(root: Path | None = None) -> list[str]:
    """Remove ``root``'s ``app-*`` folders that no live process works in; returns their names."""
    root = root or work_dir()
    if not root.is_dir():
        return []
    live = _live_working_dirs()
    if live is None:
        return []
    removed = []
    for app in sorted(root.glob("app-*")):
        if app.is_dir() and not any(d == app or app in d.parents for d in live):
            shutil.rmtree(app, ignore_errors=True)
            removed.append(app.name)
    if removed:
        log.info("removed %d finished local-cluster application folder(s) under %s", len(removed), root)
    return removed


def sweep_after(spark) -> None:
    """At interpreter exit: stop ``spark`` (its executors exit) and sweep, so a clean run of a
    local-cluster master leaves no executor folder behind (a killed one is swept by the next)."""
    import atexit

    def stop_and_sweep() -> None:
        try:
            spark.stop()
        finally:
            sweep()

    atexit.register(stop_and_sweep)
