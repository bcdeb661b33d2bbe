#!/usr/bin/env node
// An agent SDK as a sandboxed program runs one, for tokenproxy's end-to-end tests: Node's built-in
// fetch, no npm package. It holds only the key in AGENT_API_KEY (a placeholder, never the real key)
// and calls one model API the way the vendors' SDKs do.
//
// `node node_agent_sdk.mjs anthropic|openai BASE_URL`:
//   anthropic  POST BASE_URL/v1/messages with `x-api-key` and `anthropic-version`
//   openai     POST BASE_URL/v1/chat/completions with `Authorization: Bearer`
// Prints one JSON object on stdout: {"status", "body" (the answer's text), "error" (null, or why
// the call failed)}.

const [style, base] = process.argv.slice(2);
const key = process.env.AGENT_API_KEY ?? "";

const calls = {
  anthropic: {
    path: "/v1/messages",
    headers: { "x-api-key": key, "anthropic-version": "2023-06-01" },
    body: { model: "claude-test", max_tokens: 16, messages: [{ role: "user", content: "hello" }] },
  },
  openai: {
    path: "/v1/chat/completions",
    headers: { authorization: `Bearer ${key}` },
    body: { model: "gpt-test", messages: [{ role: "user", content: "hello" }] },
  },
};

const call = calls[style];
let result;
if (!call || !base) {
  result = { status: 0, body: "", error: "usage: node node_agent_sdk.mjs anthropic|openai BASE_URL" };
} else {
  try {
    const answer = await fetch(base + call.path, {
      method: "POST",
      headers: { "content-type": "application/json", ...call.headers },
      body: JSON.stringify(call.body),
      signal: AbortSignal.timeout(30_000),
    });
    result = { status: answer.status, body: await answer.text(), error: null };
  } catch (error) {
    result = { status: 0, body: "", error: String(error) };
  }
}
console.log(JSON.stringify(result));
