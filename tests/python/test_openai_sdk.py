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


# Anthropic and native Gemini models through /v1/chat/completions: the
# gateway translates the request, the answer and the stream.
TRANSLATED = ["anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash"]


@pytest.mark.parametrize("model", TRANSLATED)
def test_translated_chat(client, model):
    r = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello"},
        ],
        max_tokens=16,
    )
    assert r.object == "chat.completion"
    assert r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert 0 < r.usage.completion_tokens <= 16
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


@pytest.mark.parametrize("model", TRANSLATED)
def test_translated_streaming_chat_with_usage(client, model):
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Count to five"}],
        max_tokens=6,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage.append(chunk.usage)
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
    assert len(text.split()) == 6
    assert finish == "length"
    assert len(usage) == 1 and usage[0].completion_tokens == 6


def test_models_list(client):
    ids = [m.id for m in client.models.list()]
    # Real models of every provider, not wildcards.
    assert "openai/gpt-4o-mini" in ids
    assert any(i.startswith("anthropic/claude") for i in ids)
    assert any(i.startswith("google/gemini") for i in ids)
    assert not any(i.endswith("/*") for i in ids)


def test_models_retrieve(client):
    m = client.models.retrieve("openai/gpt-4o-mini")
    assert m.id == "openai/gpt-4o-mini" and m.owned_by == "openai"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nobody/x")


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


def test_a_cached_stream_is_replayed_as_sse(gateway, client):
    # temperature 0: cached. The first answer streams from the sim and is
    # stored once it ends; the second is replayed from the cache.
    ask = dict(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": "Replay me, please"}],
        temperature=0,
        stream=True,
    )
    first = client.chat.completions.with_raw_response.create(**ask)
    assert first.headers["x-sluice-cache"] == "miss"
    live = "".join(c.choices[0].delta.content or "" for c in first.parse())

    second = client.chat.completions.with_raw_response.create(
        **ask, stream_options={"include_usage": True}
    )
    assert second.headers["x-sluice-cache"] == "hit"
    assert second.headers["content-type"].startswith("text/event-stream")
    text, usage, roles, finish = "", [], [], []
    for chunk in second.parse():
        if chunk.usage is not None:
            usage.append(chunk.usage)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.delta.role:
                roles.append(choice.delta.role)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    assert text == live and text
    assert roles == ["assistant"]
    assert len(finish) == 1
    assert len(usage) == 1 and usage[0].completion_tokens > 0

    # Not streamed, the same entry: the whole answer.
    whole = client.chat.completions.with_raw_response.create(
        **{**ask, "stream": False}
    )
    assert whole.headers["x-sluice-cache"] == "hit"
    assert whole.parse().choices[0].message.content == live


@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash"])
def test_responses_reach_every_provider(client, model):
    r = client.responses.create(model=model, input="Say hello", max_output_tokens=16)
    assert r.output_text and r.usage.output_tokens > 0
    # Not cut: a cut one ends with `response.incomplete`, as OpenAI's does,
    # which the SDK's stream helper does not take as an end.
    with client.responses.stream(model=model, input="Count to five", max_output_tokens=500) as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        final = s.get_final_response()
    assert text and final.output_text == text
    assert final.status == "completed" and final.usage.output_tokens > 0


# OpenAI's other endpoints (#37): the legacy completions for every
# provider (translated via chat where the provider speaks another format),
# and transcriptions (multipart, as the SDK writes it), images and
# moderations passed through to OpenAI-format providers.
@pytest.mark.parametrize("model", ["openai/gpt-3.5-turbo-instruct"] + TRANSLATED)
def test_legacy_completions(client, model):
    r = client.completions.create(model=model, prompt="Say hello", max_tokens=5)
    assert r.object == "text_completion"
    assert r.choices[0].text
    assert r.usage.completion_tokens == 5
    stream = client.completions.create(
        model=model, prompt="Say hello", max_tokens=5, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices)
    assert [c.usage.completion_tokens for c in chunks if c.usage] == [5]


def test_transcription(client):
    audio = ("hello.wav", b"RIFF" + bytes(3000), "audio/wav")
    r = client.audio.transcriptions.create(model="openai/gpt-4o-transcribe", file=audio)
    assert r.text
    text = client.audio.transcriptions.create(
        model="openai/whisper-1", file=audio, response_format="text"
    )
    assert isinstance(text, str) and text


def test_images_and_moderations(client):
    r = client.images.generate(model="openai/gpt-image-1", prompt="a sluice gate", n=2)
    assert len(r.data) == 2
    m = client.moderations.create(model="openai/omni-moderation-latest", input=["a", "b"])
    assert len(m.results) == 2 and m.results[0].flagged is False
    with pytest.raises(openai.BadRequestError) as e:
        client.images.generate(model="anthropic/claude-sonnet-4-5", prompt="x")
    assert "/v1/images/generations" in str(e.value)
