"""Personas are data files, validated on load; adding one needs no code."""

import shutil

import pytest

from config.errors import PersonaError
from config.personas import load_personas
from config.settings import PROJECT_ROOT

pytestmark = pytest.mark.fast

PROMPTS = PROJECT_ROOT / "prompts"


def test_shipped_personas_default_first():
    personas = load_personas(PROMPTS, "tour_guide")
    assert [persona.name for persona in personas][:1] == ["tour_guide"]
    assert {"tour_guide", "assistant"} <= {persona.name for persona in personas}
    assert "导游" in personas[0].system_prompt
    labels = " ".join(starter.label for starter in personas[0].starters)
    assert all(topic in labels for topic in ("一日游", "早茶", "亲子"))
    assert all(persona.starters for persona in personas)


def test_a_new_file_is_a_new_persona(tmp_path):
    shutil.copytree(PROMPTS, tmp_path, dirs_exist_ok=True)
    (tmp_path / "poet.toml").write_text(
        'display_name = "诗人"\ndescription = "writes poems"\nsystem_prompt = "You write poems."\n')
    assert "poet" in {persona.name for persona in load_personas(tmp_path, "tour_guide")}


def test_unknown_key_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "bad.toml").write_text(
        'display_name = "x"\ndescription = "x"\nsystem_prompt = "x"\ntemprature = 0.3\n')
    with pytest.raises(PersonaError, match=r"bad\.toml.*temprature"):
        load_personas(tmp_path, "bad")


def test_unknown_default_lists_what_exists():
    with pytest.raises(PersonaError, match="tour_guide"):
        load_personas(PROMPTS, "pirate")


def test_a_starter_needs_a_label_and_a_message(tmp_path):
    (tmp_path / "bad.toml").write_text('display_name = "x"\ndescription = "x"\nsystem_prompt = "x"\n'
                                       '[[starters]]\nlabel = "hi"\n')
    with pytest.raises(PersonaError, match=r"bad\.toml.*label and message"):
        load_personas(tmp_path, "bad")


def test_a_persona_sets_its_default_sampling_where_the_settings_leave_it(tmp_path):
    from chat.chat_options import initial_options
    from config.settings import load_settings

    (tmp_path / "calm.toml").write_text('display_name = "x"\ndescription = "x"\nsystem_prompt = "x"\n'
                                        'temperature = 0.2\ntop_p = 0.9\n')
    [calm] = load_personas(tmp_path, "calm")
    options = initial_options(load_settings({"CHAT_MODEL": "/m"}), calm)
    assert (options.temperature, options.top_p) == (0.2, 0.9)
    everyone = initial_options(load_settings({"CHAT_MODEL": "/m", "CHAT_TEMPERATURE": "0"}), calm)
    assert (everyone.temperature, everyone.top_p) == (0.0, 0.9)  # CHAT_TEMPERATURE is every persona's
    assert initial_options(load_settings({"CHAT_MODEL": "/m"})).temperature == 0.7  # neither says: 0.7
    (tmp_path / "calm.toml").write_text('display_name = "x"\ndescription = "x"\nsystem_prompt = "x"\ntemperature = 3\n')
    with pytest.raises(PersonaError, match=r"calm\.toml: temperature must be a number from 0.0 to 2.0"):
        load_personas(tmp_path, "calm")


def test_a_persona_names_the_widgets_host_sites_as_origins(tmp_path):
    persona = 'display_name = "x"\ndescription = "x"\nsystem_prompt = "x"\nwidget_origins = [{}]\n'
    (tmp_path / "museum.toml").write_text(persona.format('"https://museum.example.cn", "http://10.0.0.5:8080"'))
    [museum] = load_personas(tmp_path, "museum")
    assert museum.widget_origins == ("https://museum.example.cn", "http://10.0.0.5:8080")
    (tmp_path / "museum.toml").write_text(persona.format('"https://museum.example.cn/visit"'))
    with pytest.raises(PersonaError, match=r"museum\.toml: widget_origins must be a list of origins"):
        load_personas(tmp_path, "museum")
