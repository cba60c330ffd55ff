"""The MPI rank of this process, for upstream jpwr's `--use-mpi` (the rank
names the files) and `--mpi-ranks` (only those ranks measure).

The launcher that started the process names its rank in the environment
(Open MPI's mpirun, PMIx, MPICH's and Intel MPI's hydra, MVAPICH, Slurm's
srun): that is the process's rank in MPI_COMM_WORLD, read without starting
MPI in jpwr's own process, which would then be a second process of that
rank beside an MPI program jpwr measures. Where no launcher names it,
mpi4py's COMM_WORLD gives it, as upstream jpwr takes it, where mpi4py is
installed. mpi4py is no dependency of jpwr: an MPI and its mpi4py are the
centre's (a module built for its network), so the suite's lock holds
neither."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

# the variables launchers set to the process's rank in MPI_COMM_WORLD, the MPIs' own first
LAUNCHER_RANKS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")


class NoRank(ValueError):
    """Neither a launcher nor mpi4py names this process's rank."""


def launcher_rank(environ: Mapping[str, str]) -> tuple[int, str] | None:
    """(rank, the variable that names it), or None."""
    for name in LAUNCHER_RANKS:
        if environ.get(name, "").isdigit():
            return int(environ[name]), name
    return None


def mpi4py_rank() -> int | None:
    """COMM_WORLD's rank through mpi4py (which starts MPI), or None where
    mpi4py is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return int(MPI.COMM_WORLD.Get_rank())


def rank(environ: Mapping[str, str] = os.environ,
         mpi: Callable[[], int | None] = mpi4py_rank) -> tuple[int, str]:
    """(this process's MPI rank, where it came from); NoRank where nothing names it."""
    found = launcher_rank(environ)
    if found is not None:
        return found
    from_mpi = mpi()
    if from_mpi is not None:
        return from_mpi, "mpi4py"
    raise NoRank("--use-mpi: no MPI rank for this process: no launcher variable "
                 f"({', '.join(LAUNCHER_RANKS)}) is set and mpi4py is not installed; start jpwr "
                 "with mpirun or srun, or install the centre's mpi4py")
