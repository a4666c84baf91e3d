"""The chat as visitors see it, beside Chainlit's own page: chat settings, the live statistics sidebar, a reply
streamed, its sources, the teaching view, notices, and the page's language and offline assets."""
