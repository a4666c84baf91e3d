"""The web server around the chat: who may reach it (origins, logins), the line of replies, this machine's
memory, and health and metrics for operators.

Speaks Chainlit's server (FastAPI, Socket.IO) and the app's settings; knows nothing of the model beyond
the engine service's state.
"""
