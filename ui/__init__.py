"""The chat as visitors see it, beside Chainlit's own page: personas, chat settings, the live statistics
sidebar and the page's language and offline assets."""
