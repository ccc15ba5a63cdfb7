"""The parallel machinery: background workers, chunk hand-off, parallelism resolution (imports only ``core``)."""
