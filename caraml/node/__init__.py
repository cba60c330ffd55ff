"""The node side: the driver core every benchmark's driver runs on, and what it
uses (options, timing, stopping, distributed set-up, precision, memory, the
energy window, throughput, provenance, the data-parallel shell, the run's
power limits). It reads
and writes no row: what it prints is the JUBE adapter's lines
(caraml/report.py), which the row model reads."""
