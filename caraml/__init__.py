"""Python shared by the suite's benchmarks: systems, pre-flight checks,
distributed set-up, timing, stopping, energy and the result lines."""
