"""`python -m retrieval [--persona NAME] [QUESTION]`: index the knowledge folders now (the app does so at start and
every few seconds), report what each holds, and with a question show the passages a reply would get, with scores.

Uses the same settings as the app (`.env`, `CHAT_*`), so it indexes into the same file; safe while the app runs.
The passages' budget is counted here in characters, not in the model's tokens (no tokenizer is loaded), so the app
may give the model a little more.
"""

from __future__ import annotations

import argparse
import logging
import sys

from config.cantonese import as_the_model_reads
from config.errors import ChatError, cannot
from config.personas import load_personas
from config.settings import load_env_file, load_settings
from retrieval.grounding import label
from retrieval.knowledge_base import KnowledgeBase


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m retrieval", description=__doc__.split("\n\n")[0])
    parser.add_argument("question", nargs="?", help="show the passages found for this question")
    parser.add_argument("--persona", help="whose folders to search (default: CHAT_PERSONA)")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    load_env_file()
    try:
        settings = load_settings()
        personas = {persona.name: persona for persona in load_personas(settings.prompts_dir, settings.persona)}
    except ChatError as error:
        sys.exit(cannot("index the knowledge folders", error))
    knowledge = KnowledgeBase(settings.knowledge_index, settings.knowledge_folder,
                              {name: persona.knowledge for name, persona in personas.items()})
    knowledge.sync_all(first=True)
    if arguments.question:
        persona = arguments.persona or settings.persona
        history = as_the_model_reads([{"role": "user", "content": arguments.question}])  # as a reply searches
        for number, passage in enumerate(knowledge.search(persona, history, settings.max_model_len // 3), 1):
            print(f"\n[{number}] {passage.score:.2f}  {label(passage)}  ({passage.path})\n{passage.text}")


if __name__ == "__main__":
    main()
