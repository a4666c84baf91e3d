"""What the tests and the benchmark share to run things as people do: the app started with Chainlit's own
command (`app_process`), a visitor over Chainlit's socket (`visitor`), a real Chromium page (`browser`), a vLLM
server (`vllm_server`), the questions they ask (`questions`) and the figures taken of the replies (`figures`).
"""
