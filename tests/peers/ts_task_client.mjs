// A TypeScript SDK client (the SDK inside node_modules) that calls server-everything's
// simulate-research-query as a 2025-11-25 task with `client.experimental.tasks.callToolStream`,
// over stdio: `node ts_task_client.mjs CMD ARGS...`, or Streamable HTTP:
// `node ts_task_client.mjs URL`. Prints one JSON line: the message types seen (a status
// message as its status) and the final result's text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [command, ...args] = process.argv.slice(2);
const transport = command.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, stderr: "ignore" });
const client = new Client({ name: "ts-task", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
const seen = [];
let text = null;
const stream = client.experimental.tasks.callToolStream(
  { name: "simulate-research-query", arguments: { topic: "lint", ambiguous: false } },
  CallToolResultSchema, { task: { ttl: 60000 } });
for await (const message of stream) {
  seen.push(message.type === "taskStatus" ? message.task.status : message.type);
  if (message.type === "result") text = message.result.content?.[0]?.text ?? null;
  if (message.type === "error") text = String(message.error);
}
console.log(JSON.stringify({ seen, text }));
await client.close();
