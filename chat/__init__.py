"""A chat from a question to its stored reply: the app's parts built once (`parts`), a chat's state (`session`), the
line of replies (`reply_line`), the reply pipeline (`reply`) and its alternatives (`alternatives`)."""
