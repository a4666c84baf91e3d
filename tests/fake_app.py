"""`python -m tests.fake_app run app.py [chainlit's options]`: Chainlit's own command serving the real app,
with `tests.fake_engine.FakeEngine` as its engine instead of vLLM. This is how a test starts the real app on
the fake (`FakeApp` in `tests/conftest.py`): the app, its handlers, Chainlit and the sockets are all real;
only the engine behind `engine.api`'s door is scripted. Starts in seconds and never imports vLLM.
"""

from pathlib import Path

from chainlit.cli import cli

from engine import service
from tests.fake_engine import CharacterTokenizer, FakeEngine

service.BACKEND = service.Backend(locate=lambda settings: Path(FakeEngine.model_name), load=FakeEngine.load,
                                  tokenizer=lambda model: CharacterTokenizer())

if __name__ == "__main__":
    cli()
