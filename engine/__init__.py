"""Everything about the model: configuration, personas, prompt rendering and the vLLM CPU engine.

Nothing in this package imports Chainlit; the app talks to it through `engine.service`.
"""
