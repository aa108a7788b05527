"""One ingest run: the registry of sources, the bronze step, the derived step and the batches
a run is cut into."""
