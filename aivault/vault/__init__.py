"""The vault: the index of one data directory through its life -- who may write it, the live service
(consent, retention, indexing, clear, reclaim, outage and reopening), the read-only services, the
one-shot index, and the endpoints every caller dispatches through.

Between the read engine and the writer below (``aivault.query``, ``aivault.indexer``) and the
processes that serve requests above (``aivault.broker``, the CLI and front ends).
"""
