"""Hypothesis strategies: random (uneven) chunkings of an axis."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def chunks(draw, size: int, max_chunks: int = 6):
    """A tuple of positive chunk sizes summing to ``size``."""
    n = draw(st.integers(1, min(max_chunks, size)))
    cuts = (
        sorted(draw(st.sets(st.integers(1, size - 1), min_size=n - 1, max_size=n - 1)))
        if n > 1
        else []
    )
    edges = [0, *cuts, size]
    return tuple(b - a for a, b in zip(edges[:-1], edges[1:], strict=True))
