"""Serving the model: one vLLM CPU engine per process, prompts rendered with the model's chat template, replies
streamed as events.

Nothing in this package imports Chainlit; the app reaches the engine through `engine.api` (what a reply is)
and `engine.service` (`EngineService`, the one engine of this process). Getting a model ready is `modelprep`'s job.
"""
