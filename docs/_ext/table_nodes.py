"""One docutils table builder for the extensions that render tables (results, config)."""

from __future__ import annotations

import re

from docutils import nodes


def inline(text: str) -> list[nodes.Node]:
    """``text`` as docutils nodes: the parts between backquotes as inline code, the parts
    between double asterisks (outside backquotes) in bold."""
    out: list[nodes.Node] = []
    for i, part in enumerate(re.split(r"`([^`]*)`", text)):
        if i % 2:
            out += [nodes.literal(text=part)] if part else []
            continue
        for j, piece in enumerate(re.split(r"\*\*(.+?)\*\*", part)):
            if piece:
                out.append(nodes.strong(text=piece) if j % 2 else nodes.Text(piece))
    return out


def table(header: list[str], rows: list[list[str]], *, widths=None, classes=()) -> nodes.table:
    """A docutils table: one header row, then ``rows``; text between backquotes is code, text
    between double asterisks bold.

    ``widths``: relative column widths (given to the theme as such); equal by default.
    """
    out = nodes.table(classes=[*classes, *(["colwidths-given"] if widths else [])])
    group = nodes.tgroup(cols=len(header))
    out += group
    for width in widths or [1] * len(header):
        group += nodes.colspec(colwidth=width)

    def row(cells: list[str]) -> nodes.row:
        line = nodes.row()
        for text in cells:
            entry = nodes.entry()
            entry += nodes.paragraph("", "", *inline(text))
            line += entry
        return line

    head = nodes.thead()
    head += row(header)
    body = nodes.tbody()
    for cells in rows:
        body += row(cells)
    group += head
    group += body
    return out
