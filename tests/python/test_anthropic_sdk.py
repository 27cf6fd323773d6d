"""The official Anthropic SDK, pointed at Sluice in front of the simulator,
calling a model of every provider through `/v1/messages`: Anthropic's passed
through, OpenAI's and Gemini's translated."""

import json

import anthropic
import pytest

MODELS = ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash"]

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


@pytest.fixture()
def client(gateway):
    return anthropic.Anthropic(base_url=gateway["url"], api_key="unused", max_retries=0)


@pytest.mark.parametrize("model", MODELS)
def test_message(client, model):
    r = client.messages.create(
        model=model,
        max_tokens=16,
        system="Be brief.",
        messages=[{"role": "user", "content": "Say hello"}],
    )
    assert r.type == "message" and r.role == "assistant"
    assert r.content[0].type == "text" and r.content[0].text
    assert r.stop_reason in ("end_turn", "max_tokens")
    assert r.usage.input_tokens > 0
    assert 0 < r.usage.output_tokens <= 16


@pytest.mark.parametrize("model", MODELS)
def test_stream(client, model):
    with client.messages.stream(
        model=model,
        max_tokens=8,
        messages=[{"role": "user", "content": "Count to five"}],
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].text == text
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 8
    assert final.usage.input_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_tool_use_and_result(client, model):
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    r = client.messages.create(model=model, max_tokens=100, tools=[WEATHER], messages=ask)
    assert r.stop_reason == "tool_use"
    call = next(b for b in r.content if b.type == "tool_use")
    assert call.name == "get_weather" and isinstance(call.input["city"], str)
    # Streamed: the SDK assembles the call's input from its JSON deltas.
    with client.messages.stream(
        model=model, max_tokens=100, tools=[WEATHER], messages=ask
    ) as stream:
        final = stream.get_final_message()
    streamed = next(b for b in final.content if b.type == "tool_use")
    assert streamed.name == "get_weather" and isinstance(streamed.input["city"], str)
    # The result goes back; the model answers in text.
    turns = ask + [
        {"role": "assistant", "content": [c.model_dump() for c in r.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}],
        },
    ]
    r = client.messages.create(model=model, max_tokens=50, tools=[WEATHER], messages=turns)
    assert r.content[0].type == "text" and r.stop_reason != "tool_use"


@pytest.mark.parametrize("model", MODELS)
def test_count_tokens(client, model):
    r = client.messages.count_tokens(
        model=model, messages=[{"role": "user", "content": "Say hello to the world"}]
    )
    assert r.input_tokens > 0


def test_what_gemini_cannot_take_is_a_400_naming_it(client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(
            model="google/gemini-2.5-flash",
            max_tokens=16,
            extra_body={"top_k": 5},
            messages=[{"role": "user", "content": "Hi"}],
        )
    assert "top_k" in str(e.value) and "Gemini" in str(e.value)
