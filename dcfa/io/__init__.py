"""Zarr archives in, Zarr results out.

Reading
    :func:`open_archive` opens variables of a Zarr store (format 2 or 3) lazily as one
    ``(sample, ...features)`` DataArray; :func:`plan_chunks` re-chunks archives whose chunks are
    too thin in time for the passes ahead (one time step per chunk is common) and says what that
    costs; :func:`fit_preprocessing` computes, in one pass, which cells hold data (land cells
    hold none), the mean seasonal cycle and the anomalies' standard deviation;
    :func:`apply_preprocessing` applies them lazily.
Targets
    :func:`open_target` reads a target series from a Zarr store, a netCDF file or a CSV file;
    :func:`align_target` keeps the samples both have (optionally matching on the calendar
    month) and says how many.
Writing
    :func:`write_result` writes the reduced features, the map of groups on the original grid
    (NaN where a cell was not used), group sizes and correlations, the GBMAP embedding, the
    moments and provenance to a new Zarr store, through a temporary store and a rename.
"""

from dcfa._lazy import lazy_attributes

# imported on first use: the batch job checks paths through dcfa.io.sources and dcfa.storage.store
# before it needs xarray (a refused output path is said in well under a second)
_EXPORTS = {
    "ChunkWarning": "dcfa.io.archive",
    "open_archive": "dcfa.io.archive",
    "plan_chunks": "dcfa.io.archive",
    "Preprocessing": "dcfa.io.preprocess",
    "apply_preprocessing": "dcfa.io.preprocess",
    "fit_preprocessing": "dcfa.io.preprocess",
    "result_dataset": "dcfa.io.result",
    "write_dataset": "dcfa.io.result",
    "write_result": "dcfa.io.result",
    "align_target": "dcfa.io.target",
    "open_target": "dcfa.io.target",
}

__all__ = [
    "open_archive",
    "plan_chunks",
    "Preprocessing",
    "fit_preprocessing",
    "apply_preprocessing",
    "open_target",
    "align_target",
    "result_dataset",
    "write_result",
    "write_dataset",
    "ChunkWarning",
]

__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, __all__)
