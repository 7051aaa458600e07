// A TypeScript SDK client (the SDK inside node_modules) that calls server-everything's
// long-running tool with a progress callback, over stdio: `node ts_progress_client.mjs CMD ARGS...`.
// Prints one JSON line: the progress values seen and the result's text.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: "ignore" });
const client = new Client({ name: "ts-progress", version: "1.0.0" });
await client.connect(transport);
const progress = [];
const result = await client.callTool(
  { name: "trigger-long-running-operation", arguments: { duration: 0.5, steps: 5 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
console.log(JSON.stringify({ progress, text: result.content[0].text }));
await client.close();
