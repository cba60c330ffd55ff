"""The row model: one measured configuration (a JUBE work package, or a job
ReFrame ran) decided once, from what its job left, into one record that
every table, file and check reads (docs/architecture.md)."""
