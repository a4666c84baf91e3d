"""Everything about the model: configuration, prompt rendering and the vLLM CPU engine.

Nothing in this package imports Chainlit; the app reaches the engine through `engine.api` (what a reply is)
and `engine.service` (the one engine of this process).
"""
