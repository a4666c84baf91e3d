"""Conversations that last: the SQLite database behind Chainlit's data layer, rebuilding a conversation from
what was stored, export and retention. Only `history.store` speaks Chainlit.
"""
