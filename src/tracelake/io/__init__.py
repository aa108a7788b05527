"""Raw files in, typed rows out: text lines, the parser contract, encodings, archives, and the
run's scratch Parquet (the only place that writes it)."""
