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

from dcfa.io.archive import ChunkWarning, open_archive, plan_chunks
from dcfa.io.preprocess import Preprocessing, apply_preprocessing, fit_preprocessing
from dcfa.io.result import result_dataset, write_dataset, write_result
from dcfa.io.target import align_target, open_target

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
