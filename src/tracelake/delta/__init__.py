"""The lake's Delta tables: catalog and reads, the one commit entry with its write modes,
fingerprints, the staged-file commit, maintenance and the write lock."""
