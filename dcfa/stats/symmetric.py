"""A symmetric ``p x p`` matrix kept as its upper block tiles. NumPy only.

The dense moments pass (:mod:`dcfa.stats.graph`) computes the tiles ``(I, J)``, ``I <= J``, of
the cross-products of ``b`` column blocks; the blocks below the diagonal are their transposes.
Assembling the matrix doubles what the driver holds while it concatenates, and the matrix
itself is twice the tiles. The partition reads rows and columns only, so a dense fit keeps the
tiles as they come: ``(b + 1) / 2b`` of the matrix (0.54 for twelve blocks).

Element ``(a, c)`` is ``tiles[I, J][a, c]`` for ``I <= J`` (the blocks of ``a`` and ``c``)
and ``tiles[J, I][c, a]`` otherwise: exactly the matrix ``np.asarray`` assembles (a diagonal
tile is kept as computed; it need not be symmetric to the last bit).
"""

from __future__ import annotations

import numpy as np

from dcfa._errors import InputError

__all__ = ["SymmetricTiles", "tile_columns", "TILE_COLUMNS"]

# The widest column block of a tiled pass: tiles of 8 MiB at most, so that a D = 11 340 fit
# has 12 blocks (0.54 of the matrix kept) and a task's temporaries stay small.
TILE_COLUMNS = 1024


def tile_columns(widths, limit: int = TILE_COLUMNS) -> tuple[int, ...]:
    """Column chunk sizes for a tiled pass: each chunk wider than ``limit`` split into the
    fewest near-equal pieces of at most ``limit`` columns; narrower chunks kept."""
    out: list[int] = []
    for w in widths:
        pieces = -(-int(w) // limit)
        base, extra = divmod(int(w), pieces)
        out.extend([base + 1] * extra + [base] * (pieces - extra))
    return tuple(out)


class SymmetricTiles:
    """The upper block tiles of a symmetric ``p x p`` float64 matrix.

    Indexes like the matrix for the reads the partition makes (a row ``m[a]``, ``m[a, cols]``,
    a column ``m[rows, c]``, blocks ``m[np.ix_(rows, cols)]`` and ``m[r0:r1, c0:c1]``);
    :meth:`diagonal`; ``np.asarray(m)`` assembles the matrix.

    Parameters
    ----------
    edges : sequence of int
        Block boundaries ``[0, e_1, ..., p]``.
    tiles : dict of (int, int) to ndarray
        Tile ``(I, J)``, ``I <= J``, of shape ``(w_I, w_J)``; Dask delayed values while lazy.
    """

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, edges, tiles: dict):
        self.edges = np.asarray(edges, dtype=np.int64)
        self.tiles = dict(tiles)
        nb = self.edges.size - 1
        expected = {(i, j) for i in range(nb) for j in range(i, nb)}
        if set(self.tiles) != expected:
            raise InputError(f"tiles: expected the {len(expected)} tiles (I, J), I <= J")
        p = int(self.edges[-1])
        self.shape = (p, p)
        self._block = np.repeat(np.arange(nb), np.diff(self.edges))
        self._local = np.arange(p) - self.edges[self._block]

    @property
    def n_blocks(self) -> int:
        return self.edges.size - 1

    @property
    def nbytes(self) -> int:
        return int(sum(t.nbytes for t in self.tiles.values()))

    @property
    def is_lazy(self) -> bool:
        return any(not isinstance(t, np.ndarray) for t in self.tiles.values())

    def with_tiles(self, tiles: dict) -> SymmetricTiles:
        return SymmetricTiles(self.edges, tiles)

    def _slice(self, b: int) -> slice:
        return slice(int(self.edges[b]), int(self.edges[b + 1]))

    # -- reads ------------------------------------------------------------------------------

    def row(self, a: int) -> np.ndarray:
        """Row ``a`` (a new array of ``p`` values)."""
        i, la = int(self._block[a]), int(self._local[a])
        t = self.tiles
        return np.concatenate(
            [t[i, j][la] if i <= j else t[j, i][:, la] for j in range(self.n_blocks)]
        )

    def column(self, c: int) -> np.ndarray:
        """Column ``c`` (a new array of ``p`` values)."""
        j, lc = int(self._block[c]), int(self._local[c])
        t = self.tiles
        return np.concatenate(
            [t[i, j][:, lc] if i <= j else t[j, i][lc] for i in range(self.n_blocks)]
        )

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``matrix[np.ix_(rows, cols)]`` (a new array)."""
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        out = np.empty((rows.size, cols.size))
        rb, cb = self._block[rows], self._block[cols]
        for i in np.unique(rb).tolist():
            ri = np.flatnonzero(rb == i)
            rl = self._local[rows[ri]]
            for j in np.unique(cb).tolist():
                ci = np.flatnonzero(cb == j)
                cl = self._local[cols[ci]]
                if i <= j:
                    out[np.ix_(ri, ci)] = self.tiles[i, j][np.ix_(rl, cl)]
                else:
                    out[np.ix_(ri, ci)] = self.tiles[j, i][np.ix_(cl, rl)].T
        return out

    def diagonal(self) -> np.ndarray:
        """The diagonal (a new array)."""
        return np.concatenate([np.diagonal(self.tiles[i, i]) for i in range(self.n_blocks)])

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key, slice(None))
        if len(key) != 2:
            raise IndexError(f"SymmetricTiles: expected 1 or 2 indices, got {len(key)}")
        r, c = key
        if _is_int(r):
            return self.row(_position(r, self.shape[0]))[c]
        if _is_int(c):
            return self.column(_position(c, self.shape[1]))[r]
        rows, cols = np.asarray(r), np.asarray(c)
        ix = rows.ndim == 2 and cols.ndim == 2 and rows.shape[1] == 1 and cols.shape[0] == 1
        if ix:  # np.ix_(rows, cols)
            return self.block(rows.ravel(), cols.ravel())
        if isinstance(r, slice) or isinstance(c, slice):
            p = self.shape[0]
            return self.block(np.arange(p)[r], np.arange(p)[c])
        raise IndexError(
            "SymmetricTiles: index a row, a column, np.ix_(rows, cols) or slices; "
            "np.asarray(m) gives the matrix"
        )

    def write_into(self, target):
        """Write the matrix into ``target`` (a ``p x p`` NumPy or Zarr array) tile by tile."""
        for (i, j), t in self.tiles.items():
            target[self._slice(i), self._slice(j)] = t
            if i != j:
                target[self._slice(j), self._slice(i)] = t.T
        return target

    def __array__(self, dtype=None, copy=None):
        full = self.write_into(np.empty(self.shape))
        return full if dtype is None else full.astype(dtype, copy=False)

    def __repr__(self) -> str:
        state = "lazy" if self.is_lazy else f"{self.nbytes / 2**20:.1f} MiB"
        return f"SymmetricTiles(shape={self.shape}, blocks={self.n_blocks}, {state})"


def _is_int(x) -> bool:
    return isinstance(x, int | np.integer)


def _position(a, p: int) -> int:
    a = int(a)
    if not -p <= a < p:
        raise IndexError(f"index {a} is out of bounds for size {p}")
    return a % p
