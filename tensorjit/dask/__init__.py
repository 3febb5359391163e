"""tensorjit on Dask: compiled functions that travel to workers, chunked evaluation of
Dask arrays, and data-parallel training. Needs the ``[dask]`` extra."""

from tensorjit.dask.blocks import COMBINABLE, BlockwiseError, map_blocks
from tensorjit.dask.shipping import Shipped, compile_count, loaded_count, ship
from tensorjit.dask.training import DataParallelTrainer, TrainingStats, sgd

__all__ = [
    "COMBINABLE",
    "BlockwiseError",
    "DataParallelTrainer",
    "Shipped",
    "TrainingStats",
    "compile_count",
    "loaded_count",
    "map_blocks",
    "sgd",
    "ship",
]
