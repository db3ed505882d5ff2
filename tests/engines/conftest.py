"""The in-process OpenAI-style server as a fixture (``openai_fake.py``), for every engine test that talks to one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.engines.openai_fake import FakeServer, running_fake_server


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with running_fake_server() as state:
        yield state
