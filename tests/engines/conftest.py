"""The in-process OpenAI-style server as the ``fake`` fixture (``openai_fake.py``), for every engine test here."""

from tests.engines.openai_fake import fake  # noqa: F401 - the fixture
