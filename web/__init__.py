"""The web server around the chat: who may reach it (origins, logins, request bodies, socket events), operators'
health and metrics routes, and the users file.

Speaks Chainlit's server (FastAPI, Socket.IO) and the app's settings; knows nothing of the model beyond the engine
service's status.
"""
