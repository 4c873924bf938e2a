"""indexer package."""
