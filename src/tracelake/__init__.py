"""tracelake: public GPU-cluster and LLM-training traces as validated Delta tables."""

__version__ = "0.1.0"
