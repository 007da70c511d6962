"""What `make lab` serves: the project, with the committed report protected from JupyterLab's saves.

Opening a committed report notebook (`report/*.ipynb`) in JupyterLab marks it changed (lab re-serialises its
outputs, adds PNG fallbacks, writes 1.0 as 1) and autosave would rewrite the file nbval checks byte for byte.
So lab never writes there: a save answers with the file as it is on disk (run it, explore it, nothing tracked
moves; to keep a variant, "Save As" anywhere else). The stage notebooks (`notebooks/*.ipynb`, paired with their
.py sources) are sources: saved with their edits but without outputs or run metadata, so running one in lab does
not turn its source into an executed copy."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

PROTECTED = ("report",)  # folders of the project whose notebooks lab never writes
SOURCES = ("notebooks",)  # folders whose notebooks are saved as sources: no outputs, the metadata on disk


def _top(path: str) -> str:
    parts = PurePosixPath(path.strip("/")).parts
    return parts[0] if len(parts) > 1 else ""


class KeepCommitted(AsyncLargeFileManager):
    async def save(self, model, path=""):
        path = path.strip("/")
        if _top(path) in PROTECTED and await self.file_exists(path):
            self.log.info("pglab: %s is the committed report; not saved (Save As elsewhere to keep a copy)", path)
            return await self.get(path, content=False)
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
