"""What every part of the app shares: its settings (`settings`, the one reader of `.env`), its personas
(`prompts/*.toml`), its errors and the one clean exit of every command (`errors.cannot`), the chat message every
part passes on (`message`), and the settings' documentation written from their definitions (`python -m config.docs`).
Nothing here imports vLLM or Chainlit, nor any other folder of ours.
"""
