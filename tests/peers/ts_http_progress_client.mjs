// A TypeScript SDK client (the SDK inside node_modules) that calls server-everything's
// long-running tool with a progress callback over HTTP:
// `node ts_http_progress_client.mjs sse|streamable URL`. Prints one JSON line: the progress
// values seen and the result's text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [kind, url] = process.argv.slice(2);
const transport = kind === "sse" ? new SSEClientTransport(new URL(url))
  : new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "ts-http-progress", version: "1.0.0" });
await client.connect(transport);
const progress = [];
const result = await client.callTool(
  { name: "trigger-long-running-operation", arguments: { duration: 0.5, steps: 5 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
console.log(JSON.stringify({ progress, text: result.content[0].text }));
await client.close();
