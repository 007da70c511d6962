"""What `make lab` serves: the project, with the committed report read-only in JupyterLab.

Opening a committed report notebook (`report/*.ipynb`) in JupyterLab marks it changed (lab re-serialises its
outputs, adds PNG fallbacks, writes 1.0 as 1) and autosave would rewrite the file nbval checks byte for byte.
So the contents API reports every file under `report/` as not writable: JupyterLab opens it in its own read-only
mode (autosave skips it, "Save" is disabled and says to use "Save As…"; run it, explore it, nothing tracked
moves), and a save that comes anyway (another client, the API) is refused with a 403 that says why, never
dropped silently. The stage notebooks (`notebooks/*.ipynb`, paired with their
.py sources) are sources: saved with their edits but without outputs or run metadata, so running one in lab does
not turn its source into an executed copy."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class
from tornado import web

PROTECTED = ("report",)  # folders of the project whose notebooks lab never writes
SOURCES = ("notebooks",)  # folders whose notebooks are saved as sources: no outputs, the metadata on disk


def _top(path: str) -> str:
    parts = PurePosixPath(path.strip("/")).parts
    return parts[0] if len(parts) > 1 else ""


def _protected(path: str) -> bool:
    return _top(path) in PROTECTED


class _SavesSources(AsyncLargeFileManager):
    async def save(self, model, path=""):
        path = path.strip("/")
        if _top(path) in SOURCES and model.get("type") == "notebook" and model.get("content"):
            model = dict(model, content=self._as_source(model["content"], path))
        return await super().save(model, path)

    def _as_source(self, nb: dict, path: str) -> dict:
        nb = json.loads(json.dumps(nb))  # a copy: the lab session keeps its outputs on screen
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"], cell["execution_count"] = [], None
            cell.get("metadata", {}).pop("execution", None)
        on_disk = self._get_os_path(path)
        try:
            with open(on_disk, encoding="utf-8") as f:
                nb["metadata"] = json.load(f).get("metadata", nb.get("metadata", {}))
        except (OSError, ValueError):
            pass
        return nb


class KeepCommitted(build_async_jupytext_contents_manager_class(_SavesSources)):
    """Jupytext's contents manager (its server extension leaves one that is already its own as it is) with the
    committed report read-only on top: a refusal here reaches the client as the 403 it is, where jupytext's save
    would turn an error beneath it into a 500."""

    def is_writable(self, path):
        # what the contents API reports as "writable": JupyterLab's read-only mode follows it
        return not _protected(path) and super().is_writable(path)

    async def save(self, model, path=""):
        if _protected(path):
            raise web.HTTPError(
                403,
                f"{path.strip('/')} is the committed report and read-only in lab; "
                "use File > Save As… to keep a copy elsewhere",
            )
        return await super().save(model, path)

    async def delete_file(self, path):
        if _protected(path):
            raise web.HTTPError(403, f"{path.strip('/')} is the committed report and read-only in lab")
        return await super().delete_file(path)

    async def rename_file(self, old_path, new_path):
        if _protected(old_path) or _protected(new_path):
            raise web.HTTPError(403, f"{old_path.strip('/')}: report/ holds the committed report, read-only in lab")
        return await super().rename_file(old_path, new_path)
