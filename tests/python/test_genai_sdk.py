"""The official google-genai SDK, pointed at Sluice in front of the simulator,
calling a model of every provider through Gemini's native API: Gemini's passed
through, OpenAI's and Anthropic's translated. The SDK sends a prefixed model
as two path segments (`models/openai/gpt-4o-mini:generateContent`)."""

import pytest
from google import genai
from google.genai import errors, types

MODELS = ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "google/gemini-2.5-flash"]

WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="The weather in a city.",
            parameters=types.Schema(
                type="OBJECT",
                properties={"city": types.Schema(type="STRING")},
                required=["city"],
            ),
        )
    ]
)


@pytest.fixture()
def client(gateway):
    return genai.Client(api_key="unused", http_options=types.HttpOptions(base_url=gateway["url"]))


@pytest.mark.parametrize("model", MODELS)
def test_generate(client, model):
    r = client.models.generate_content(
        model=model,
        contents="Say hello",
        config=types.GenerateContentConfig(max_output_tokens=16, system_instruction="Be brief."),
    )
    assert r.text
    assert r.usage_metadata.prompt_token_count > 0
    assert 0 < r.usage_metadata.candidates_token_count <= 16


@pytest.mark.parametrize("model", MODELS)
def test_stream(client, model):
    chunks = list(
        client.models.generate_content_stream(
            model=model,
            contents="Count to five",
            config=types.GenerateContentConfig(max_output_tokens=8),
        )
    )
    text = "".join(c.text or "" for c in chunks)
    assert len(chunks) > 1 and len(text.split()) == 8
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert chunks[-1].usage_metadata.candidates_token_count == 8


@pytest.mark.parametrize("model", MODELS)
def test_function_call_and_response(client, model):
    config = types.GenerateContentConfig(
        tools=[WEATHER],
        max_output_tokens=100,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    ask = types.Content(role="user", parts=[types.Part.from_text(text="Weather in Paris?")])
    r = client.models.generate_content(model=model, contents=[ask], config=config)
    call = r.function_calls[0]
    assert call.name == "get_weather" and isinstance(call.args["city"], str)
    streamed = [
        c.function_calls[0]
        for c in client.models.generate_content_stream(model=model, contents=[ask], config=config)
        if c.function_calls
    ]
    assert streamed and streamed[0].name == "get_weather"
    answer = types.Content(
        role="user",
        parts=[types.Part.from_function_response(name="get_weather", response={"weather": "sunny"})],
    )
    r = client.models.generate_content(
        model=model, contents=[ask, r.candidates[0].content, answer], config=config
    )
    assert r.text and not r.function_calls


@pytest.mark.parametrize("model", MODELS)
def test_count_tokens(client, model):
    r = client.models.count_tokens(model=model, contents="Say hello to the world")
    assert r.total_tokens > 0


def test_what_anthropic_cannot_take_is_a_400_naming_it(client):
    with pytest.raises(errors.ClientError) as e:
        client.models.generate_content(
            model="anthropic/claude-sonnet-4-5",
            contents="Hi",
            config=types.GenerateContentConfig(top_k=3),
        )
    assert e.value.code == 400
    assert "topK" in str(e.value) and "Anthropic" in str(e.value)


def test_embed_content(client):
    r = client.models.embed_content(
        model="openai/text-embedding-3-small",
        contents=["hello", "world"],
        config=types.EmbedContentConfig(output_dimensionality=8),
    )
    assert len(r.embeddings) == 2 and len(r.embeddings[0].values) == 8
