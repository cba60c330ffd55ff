"""Methods for GPUs through their vendor libraries: pynvml (NVIDIA), rocm (AMD)."""
