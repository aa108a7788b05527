"""AcmeTrace (Seren/Kalos) jobs and utilization: parsers, generator, derived tables."""
