"""Serving without a web framework: model bundles, faiss indexes, the Recommender, reloads."""

import logging

# faiss logs its CPU-feature probing at INFO on import; keep the CLI's stderr for real messages
logging.getLogger("faiss.loader").setLevel(logging.WARNING)
