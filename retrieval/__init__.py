"""Answers from documents: knowledge folders read into passages, indexed for Chinese-aware keyword (BM25) search in
SQLite's FTS5, and the passages found put before the model (`grounding`). Knows nothing of Chainlit or vLLM."""
