"""The official OpenAI SDK, pointed at Sluice in front of the simulator."""

import json
import urllib.request

import openai
import pytest


@pytest.fixture()
def client(gateway):
    return openai.OpenAI(base_url=gateway["url"] + "/v1", api_key="unused", max_retries=0)


def test_chat(client):
    r = client.chat.completions.create(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "Say hello"}],
        max_tokens=16,
    )
    assert r.choices[0].message.content
    assert r.usage.prompt_tokens > 0
    assert 0 < r.usage.completion_tokens <= 16


def test_streaming_chat(client):
    stream = client.chat.completions.create(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "Count to five"}],
        stream=True,
    )
    text = ""
    chunks = 0
    for chunk in stream:
        chunks += 1
        # The gateway asks upstream for usage; a client that did not ask
        # must not receive the usage-only chunk.
        assert chunk.choices, "usage-only chunk leaked to a client that did not ask"
        text += chunk.choices[0].delta.content or ""
    assert chunks > 1 and text


def test_streaming_chat_with_usage(client):
    stream = client.chat.completions.create(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "Count to five"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = [c.usage for c in stream if c.usage is not None]
    assert len(usage) == 1 and usage[0].total_tokens > 0


def test_embeddings(client):
    r = client.embeddings.create(model="openai/text-embedding-3-small", input=["a", "b"])
    assert len(r.data) == 2
    assert len(r.data[0].embedding) > 0


def test_errors_are_openai_shaped(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="nope/model", messages=[{"role": "user", "content": "x"}]
        )
    assert "model" in str(e.value)


def test_limits_visible(gateway, client):
    client.chat.completions.create(
        model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "x"}], max_tokens=4
    )
    with urllib.request.urlopen(gateway["url"] + "/v1/limits") as r:
        names = [x["resource"] for x in json.load(r)["resources"]]
    assert "openai/gpt-4o-mini" in names


def test_every_answer_carries_a_request_id(client):
    """`x-request-id` on answers, streams and errors: the client's own when
    it sends a valid one, else one the gateway made up."""
    raw = client.chat.completions.with_raw_response.create(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "Say hello"}],
        max_tokens=4,
        extra_headers={"x-request-id": "py-sdk-1"},
    )
    assert raw.headers["x-request-id"] == "py-sdk-1"
    assert raw.parse().choices[0].message.content

    made_up = client.embeddings.with_raw_response.create(
        model="openai/text-embedding-3-small", input=["a"]
    )
    assert made_up.headers["x-request-id"].startswith("req_")

    with client.chat.completions.with_streaming_response.create(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "Count to five"}],
        stream=True,
    ) as stream:
        assert stream.headers["x-request-id"]
        assert sum(1 for _ in stream.iter_lines()) > 0

    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="nope/model",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"x-request-id": "py-sdk-bad"},
        )
    assert e.value.response.headers["x-request-id"] == "py-sdk-bad"
    # The SDK reads it into the error too.
    assert e.value.request_id == "py-sdk-bad"
