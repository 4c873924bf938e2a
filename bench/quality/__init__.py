"""Retrieval-quality benchmark: a labelled multi-agent corpus, its queries, metrics and runner."""
