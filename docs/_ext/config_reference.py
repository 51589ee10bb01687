"""The job file's reference, rendered from the checks the job runs, so that it cannot drift.

``{config-reference}`` renders one section per section of a job file (``[input]``,
``[target]``, ...), each with a table of its keys: the type the check accepts, the default
(or "required"), and what the key is for. Everything comes from :mod:`dcfa.batch.config`:
``_SCHEMA`` (the keys, their types and defaults), ``DESCRIPTIONS`` and
``SECTION_DESCRIPTIONS`` (the text) and ``CHOICES`` (the values a key takes, where only some
are allowed). :func:`reference` builds the rows without Sphinx (tests/test_docs.py calls it).
"""

from __future__ import annotations

import json
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from table_nodes import inline, table

from dcfa.batch import config

HEADER = ["key", "type", "default", "description"]


def _default(value: Any) -> str:
    """A default as it is written in a job file (TOML), as code; "required" for ``...``."""
    if value is ...:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{'true' if value else 'false'}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    if isinstance(value, list):
        return f"`{json.dumps(value)}`"
    if isinstance(value, dict) and not value:
        return "`{}`"
    return f"`{value!r}`"


def _description(section: str, key: str) -> str:
    """The key's description, with the values it takes when the check allows only some."""
    text = config.DESCRIPTIONS[(section, key)]
    choices = config.CHOICES.get((section, key))
    if choices:
        text += " One of " + ", ".join(f"`{c}`" for c in choices) + "."
    return text


def reference() -> list[tuple[str, str, list[list[str]]]]:
    """``(section, description, rows)`` for every section of the job file, in the schema's
    order; a row is ``[key, type, default, description]`` (the key as the section's table in
    the file names it), text between backquotes is code.
    A key without a description raises KeyError, naming it."""
    out = []
    for section, keys in config._SCHEMA.items():
        rows = [
            [f"`{key}`", config._type_name(types), _default(default),
             _description(section, key)]
            for key, (types, default) in keys.items()
        ]  # fmt: skip
        out.append((section, config.SECTION_DESCRIPTIONS[section], rows))
    return out


class ConfigReference(Directive):
    """One section per section of the job file: its description and the table of its keys."""

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        env.note_dependency(config.__file__)
        made = nodes.paragraph()
        made += inline(
            "Rendered from the checks a job runs (`_SCHEMA`, `DESCRIPTIONS` and `CHOICES` in "
            "`dcfa.batch.config`): a key not listed here is refused, but in the free-form "
            "`[gbmap]`. A required key has no default; an unset one has no value unless the "
            "job file gives one (its description says what is done then)."
        )
        out: list[nodes.Node] = [made]
        for section, text, rows in reference():
            title = f"[{section}]"
            node = nodes.section(ids=[nodes.make_id(f"config-{section}")], names=[title])
            node += nodes.title("", "", nodes.literal(text=title))
            node += nodes.paragraph("", "", *inline(text))
            if rows:
                node += table(HEADER, rows, widths=(18, 14, 12, 56), classes=("config-reference",))
            self.state.document.note_implicit_target(node, node)
            out.append(node)
        return out


def setup(app):
    app.add_directive("config-reference", ConfigReference)
    return {"parallel_read_safe": True, "version": "1"}
