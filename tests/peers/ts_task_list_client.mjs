// A TypeScript SDK client (the SDK inside node_modules) that calls server-everything's
// `simulate-research-query` as a 2025-11-25 task with `client.experimental.tasks.callToolStream`
// (which polls tasks/get until the task ends, then asks tasks/result), then lists the tasks,
// over stdio: `node ts_task_list_client.mjs CMD ARGS...`. Prints one JSON line: the message types
// seen, the last status and the result's first text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: "ignore" });
const client = new Client({ name: "ts-task", version: "1.0.0" }, { capabilities: { tasks: {} } });
await client.connect(transport);
const seen = [];
let status = null;
let text = null;
const stream = client.experimental.tasks.callToolStream(
  { name: "simulate-research-query", arguments: { topic: "mcp", ambiguous: false } },
  undefined,
  { task: { ttl: 60000 } },
);
for await (const message of stream) {
  seen.push(message.type);
  if (message.task) status = message.task.status;
  if (message.type === "result") text = message.result.content?.[0]?.text ?? null;
  if (message.type === "error") text = String(message.error);
}
const listed = await client.experimental.tasks.listTasks();
console.log(JSON.stringify({ seen, status, text, listed: listed.tasks.map((t) => t.status) }));
await client.close();
