// Package fake is a deterministic stand-in for the model providers Tollgate
// speaks to (OpenAI-compatible, Anthropic Messages, Cloudflare Workers AI),
// served over real HTTP.
//
// Tollgate's tests, and anyone running Tollgate locally, need a provider that
// fails on demand (500s, rate limits, out-of-credit, hangs that leave the call
// ambiguous, broken 200s), that answers what real applications send (tools,
// structured outputs, images, several choices) and that records what it was
// sent, notably the Idempotency-Key and the body, to prove that a task was or
// was not called twice and that every field reached the provider. Scripting
// that through real HTTP, rather than mocking the client, exercises the same
// wire format, headers and timeouts as production.
//
// # Endpoints
//
//	POST /v1/chat/completions  OpenAI chat completions
//	POST /v1/responses         OpenAI Responses (responses.go): Response
//	                           objects and their events, reasoning items
//	                           with encrypted_content when include asks
//	POST /v1/messages          Anthropic Messages
//	POST /v1/embeddings        OpenAI embeddings
//	POST /client/v4/accounts/{id}/ai/run/{model}
//	                           Cloudflare Workers AI; the model is the rest
//	                           of the path, slashes included
//	POST /_fake/script         {"responses": [Scripted...]} appended; 204
//	GET  /_fake/calls          {"count": N, "calls": [Call...]}
//	POST /_fake/reset          empty the queue and the call log; 204
//
// Every model endpoint logs the call (model, Idempotency-Key and the body as
// received, see Call) in one call log, then takes the next entry of one
// shared script queue. An entry with a Body, or with an error status (not
// 2xx) and no shaping field, is served as is, whatever format it is in.
// Otherwise (an empty queue, a success entry without a Body such as
// {"delay_ms": 3000}, or a shaping entry) the endpoint answers in its own
// format with the deterministic answer below, which a shaping entry
// adjusts (see Scripted).
// Nothing is random, and the only clock is the one given with WithClock.
//
// # The conversation and its digest
//
// Every endpoint reduces its messages to a list of
// {"role","content","name","images","tool_calls","tool_call_id","refusal"}
// objects, empty fields left out, so that a plain text message is
// {"role","content"} alone: content is the text (text parts or blocks
// joined with nothing between them); images lists each image part as
// {"url","detail"}; tool_calls lists {"id","name","arguments"} with the
// arguments as compact JSON text. Anthropic's system prompt counts as one
// leading system message; a user message's tool_result blocks become one
// "tool" message each (content its text, tool_call_id its tool_use_id),
// before a user message for the rest of its blocks if any; a base64 image
// source becomes the data URL "data:<media_type>;base64,<data>", so that
// one conversation has the same digest in every format. The digest is the
// hex SHA-256 of that list encoded as JSON.
//
// # The answer
//
// The default text is "fake completion " and the first 12 hex digits of the
// digest. The answer is, in this order of precedence:
//   - a refusal, when the script says so;
//   - tool calls, when the script names a Tool or asks for ToolCalls, or
//     when the request offers tools, its tool choice is not "none" and its
//     last message is not a tool result (OpenAI and Workers AI: role
//     "tool"; Anthropic: a user message with a tool_result block), so that a
//     tool loop ends with text on its second turn. One call by default, to
//     the first tool, or to the one a named tool choice forces (OpenAI
//     {"type":"function","function":{"name"}}, Anthropic {"type":"tool",
//     "name"}); "required" and Anthropic's "any" call the first tool. The
//     arguments are an instance of the tool's JSON Schema (see below). Ids
//     are "call_fake_<n>" (OpenAI; Workers AI sends none) and
//     "toolu_fake_<n>" (Anthropic), n counting on from the tool calls
//     already in the conversation, so they stay unique over a loop;
//   - otherwise text: the script's Content; else with a json_schema
//     response format (OpenAI response_format.json_schema.schema, Anthropic
//     output_config.format or output_format {"type":"json_schema","schema"},
//     Workers AI response_format.json_schema, the schema itself) an instance
//     of the schema as compact JSON; with json_object
//     {"completion":"fake completion <12 hex>"}; else the default text.
//
// Schema instances: an object gets its required properties, or all its
// properties when none is listed as required, in name order; a string the
// first enum value or const, else "fake" (or a value of its format:
// date-time, date, time, email, uri, uuid, ipv4), padded with "x" to
// minLength and cut to maxLength; an integer or number its minimum (an
// exclusive minimum plus one), else its maximum when that is negative, else
// 0, raised to a multipleOf; a boolean false; null null; an array
// max(1, minItems) items (capped by maxItems), prefixItems first. anyOf and
// oneOf take their first member that is not null, allOf is merged, local
// $refs are followed, and deeply recursive schemas stop at their required
// properties and minItems. A missing or empty schema gives {}.
//
// Finish reasons, in OpenAI's terms: tool_calls with calls, else stop, or
// the script's FinishReason. Anthropic's stop_reason translates them:
// end_turn, max_tokens (length), tool_use, refusal (content_filter, and any
// scripted refusal).
//
// # Usage
//
// Prompt tokens are the sum over messages of ceil(chars/4)+4, where chars
// counts the content and the names and arguments of its tool calls, plus 85
// per image, plus ceil(len/4) per tool definition re-encoded as JSON. Output
// tokens are min(limit, 16) per choice, where the limit is max_tokens when
// positive, else max_completion_tokens (OpenAI), else 16. For a model given
// to WithReasoningModels half of them (rounded down) are reasoning tokens.
// Scripted CachedTokens, CacheWriteTokens and ReasoningTokens come on top:
//   - OpenAI: prompt_tokens = prompt + cached, with
//     prompt_tokens_details.cached_tokens; completion_tokens = output +
//     scripted reasoning, times n, with
//     completion_tokens_details.reasoning_tokens. Both details appear when
//     cached or reasoning tokens are not zero. Cache writes are not reported.
//   - Anthropic: input_tokens = prompt (the uncached part),
//     cache_read_input_tokens = cached, cache_creation_input_tokens = cache
//     writes (each left out when zero); output_tokens includes reasoning.
//   - Workers AI: as OpenAI.
//
// # OpenAI chat completions
//
// Accepts every field of the request: messages of any role, content as a
// string, null or text and image_url parts (any other part type is a 400),
// assistant tool_calls and refusals, tool messages; tools, tool_choice,
// parallel_tool_calls (false caps the calls at one), response_format,
// n (1-128, else a 400 param n), logprobs and top_logprobs, the sampling
// parameters (temperature, top_p, seed, stop, penalties, logit_bias, user,
// safety_identifier, reasoning_effort, verbosity, metadata; decoded only to
// refuse a value of the wrong type), and fields it does not know. The
// answer has n identical choices; with logprobs (asked, or scripted) each
// has {"content":[{"token","logprob","bytes","top_logprobs"}],"refusal":null}
// with one entry per word at logprob -0.25, top_logprobs the word itself
// then "alt1", "alt2"... at -1, -2... A tool call answer has content null
// and tool_calls [{"id","type":"function","function":{"name","arguments"}}];
// a refusal has content null and refusal set. system_fingerprint appears
// when scripted. OpenAI's own 400s (type invalid_request_error, with param
// and code) answer: max_tokens sent to a reasoning model (message
// "Unsupported parameter: 'max_tokens' is not supported with this model.
// Use 'max_completion_tokens' instead.", param max_tokens, code
// unsupported_parameter); a tool message that answers none of the calls of
// the assistant message before it (param "messages.[i].role"); tool_choice
// without tools (param tool_choice); response_format json_schema without
// json_schema. A body that does not decode is a 400 too.
//
// Streamed (stream: true), each choice in turn sends a chunk with delta
// {"role":"assistant"}, then its text a word per chunk (delta.content, with
// that word's logprobs when asked), or its refusal (delta.refusal), or per
// tool call a chunk delta.tool_calls [{"index","id","type":"function",
// "function":{"name","arguments":""}}] followed by chunks
// [{"index","function":{"arguments":<fragment>}}] of about 8 bytes each;
// then a chunk with finish_reason. With stream_options.include_usage a last
// chunk has choices [] and the usage; then "data: [DONE]".
//
// # Anthropic Messages
//
// Accepts model, max_tokens (required, as by the real API: "max_tokens:
// Field required"), system (a string or text blocks), messages with text,
// image (base64, url and file sources), tool_use, tool_result (content a
// string or blocks, is_error), thinking and redacted_thinking blocks,
// metadata, stop_sequences, stream, temperature, top_p, top_k, tools
// ({name, description, input_schema}), tool_choice (auto, any, tool, none;
// disable_parallel_tool_use caps the calls at one), thinking, output_config,
// output_format, service_tier, container, mcp_servers, context_management.
// Like the real API it refuses any other top-level field with a 400
// "<field>: Extra inputs are not permitted", which catches an OpenAI field
// sent untranslated. It also refuses a tool_result whose tool_use_id is not
// a tool_use of the previous message, a thinking budget under 1024, and
// max_tokens not above the thinking budget; a thinking block without its
// thinking or signature, or whose signature the fake made for another
// text (a thinking block altered on its way back: "Invalid `signature` in
// `thinking` block"); a redacted_thinking block without data; and, with
// thinking on, a tool loop whose calling assistant message does not
// start with a thinking block. With thinking enabled (or adaptive) the
// answer starts with a thinking block ("fake thinking <12 hex>", signature
// "fake-signature-<16 hex>", a digest of the thinking); then a text block,
// or tool_use blocks {"id","name","input"}. Errors have the shape
// {"type":"error","error":{"type":"invalid_request_error","message"}}.
// Each call records its anthropic-version and anthropic-beta headers
// (Call.Headers).
//
// Streamed: message_start (usage with input and cache tokens, output 1),
// then per block content_block_start, its deltas (text_delta a word at a
// time; thinking_delta then signature_delta; input_json_delta partial_json
// fragments of about 8 bytes of the tool input) and content_block_stop,
// then message_delta (stop_reason, usage output_tokens) and message_stop.
//
// # Workers AI
//
// Accepts messages (content a string or OpenAI parts; assistant tool_calls
// as {name, arguments} or OpenAI's {id, type, function}; tool messages),
// max_tokens, stream, tools (Workers AI's {name, description, parameters}
// or OpenAI's {type, function}), response_format and the sampling
// parameters. The answer is {"result":{"response","tool_calls","usage"},
// "success":true,"errors":[],"messages":[]}: response is the text, the JSON
// value itself for a json response format, null beside tool calls;
// tool_calls is [{"name","arguments":<object>}], left out when empty.
// Errors are the Cloudflare envelope: 5006 for a body that does not decode,
// 5007 for a missing model. Streamed: data events {"response":"<word>"},
// then {"response":"","tool_calls":[...]} when there are calls, then
// {"response":"","usage":{...}} and "data: [DONE]".
//
// # Embeddings
//
// POST /v1/embeddings accepts model, input (a string or an array of 1 to
// 2048 non-empty strings; anything else, token arrays included, is a 400
// param input), dimensions (1-16384, else a 400 param dimensions),
// encoding_format (float or base64, else a 400) and user. Its answer is
// {"object":"list","data":[{"object":"embedding","index","embedding"}],
// "model","usage":{"prompt_tokens","total_tokens"}}; each embedding is
// Vector(input, dimensions or 8), as numbers or, with base64, the base64
// of its little-endian float32 bytes; prompt_tokens is EmbeddingTokens
// (the sum of ceil(bytes/4) over the inputs).
//
// A Workers AI body with "text" (a string or strings) and no "messages" is
// an embedding model's input, whatever the model: the answer is
// {"result":{"shape":[n,8],"data":[[...]],"pooling":"cls"},"success":true,
// "errors":[],"messages":[]}, with no usage, as the vectors of
// Vector(text, 8).
//
// Both take the next scripted entry like every model endpoint: Status,
// Headers, Body, DelayMS and Hang apply; the shaping fields do not.
//
// # Scripts
//
// Scripted entries shape the answer of the call that takes them: Tool,
// ToolCalls (parallel calls, call i to tool i modulo the number offered),
// Text (force text), Content, Refusal, FinishReason, the usage classes,
// Logprobs, SystemFingerprint; for Anthropic, Thinking (a thinking block
// of this text, signed as the fake signs, or with Signature),
// RedactedThinking (a redacted_thinking block of this data) and
// StopSequence (stop_reason stop_sequence with it); StreamCutAfter (cut the connection after
// that many content chunks: words, refusal words or argument fragments)
// and ChunkDelayMS (wait before each) on a streamed call. Status, Headers,
// DelayMS and Hang apply to shaped answers too. A shaping entry does not
// bypass the request checks above: a refused request consumes it.
package fake
