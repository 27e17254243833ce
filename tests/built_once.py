"""Session fixtures built once per test session, also when pytest-xdist (`pytest -n 2`) runs it in several processes."""

from __future__ import annotations

import json
import os
from pathlib import Path


def built_once(tmp_path_factory, name: str, build):
    """`build(folder)` run once per test session, even when pytest-xdist splits the session over processes.

    Without xdist this is `build(tmp_path_factory.mktemp(name))`. Under xdist (`pytest -n 2`) every worker has
    its own session, so a session fixture would be built once per worker; here the first worker to ask builds
    it in the session's shared temporary folder while holding a file lock, records what it returned, and the
    others wait for the lock and read that record. What is built must therefore be read-only for the tests
    (each fixture below says so) and `build` must return a path or a dict of paths.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # the session's folder, above each worker's own
    folder, record = shared / f"built-{name}", shared / f"built-{name}.json"
    with FileLock(str(shared / f"built-{name}.lock")):
        if not record.is_file():
            if folder.exists():  # another worker's build that failed: start it again from nothing
                import shutil

                shutil.rmtree(folder)
            folder.mkdir()
            made = build(folder)
            as_json = {k: str(v) for k, v in made.items()} if isinstance(made, dict) else str(made)
            record.write_text(json.dumps(as_json), encoding="utf-8")  # last: a build that failed leaves none
    made = json.loads(record.read_text(encoding="utf-8"))
    return {k: Path(v) for k, v in made.items()} if isinstance(made, dict) else Path(made)
