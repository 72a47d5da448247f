"""What ``tierlog lab`` changes in a notebook as Jupyter saves it: the ``language_info``
the kernel reports is cut back to the language's name.

A kernel fills ``language_info`` in when a notebook is opened (its Python version, lexer,
MIME type...), which marks the notebook changed, and the lab's autosave then rewrote every
notebook a user had only opened: the shipped notebooks showed as modified in ``git status``
(issue 25). The notebooks are shipped with ``{"name": "python"}`` there, so with this hook an
opened, unchanged notebook is saved byte for byte as it was. Nothing a reader uses is lost:
the kernel reports the rest again on every start.

Jupyter calls the hook (``ContentsManager.pre_save_hook``) with the model about to be saved.
"""

from __future__ import annotations

from typing import Any


def keep_language_name(model: dict[str, Any], **kwargs: Any) -> None:
    """Trim a notebook model's ``metadata.language_info`` to its ``name`` (in place)."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    metadata = model["content"].get("metadata")
    if not isinstance(metadata, dict):
        return
    info = metadata.get("language_info")
    if isinstance(info, dict) and "name" in info:
        metadata["language_info"] = {"name": info["name"]}
