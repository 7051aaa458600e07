// A TypeScript test suite whose MCP server is a recording: `mcprec replay` serves the bundled
// cassette (weather.db, session v1) to the TypeScript SDK's client, over stdio and over
// Streamable HTTP. No server, no network, the same answers every run.
//
//   node --test "examples/typescript/*.test.ts"     (Node >= 22.18 runs .ts files as they are)
//
// MCPREC names the mcprec executable (default: `mcprec` on PATH).
import { strict as assert } from "node:assert";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const MCPREC = process.env.MCPREC ?? "mcprec";
const CASSETTE = join(dirname(fileURLToPath(import.meta.url)), "weather.db");

type Text = { type: string; text: string };

// What the recording answers, the same through either transport.
async function checkTheRecordedAnswers(client: Client): Promise<void> {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ["alerts", "forecast", "packing_tip", "report"]);

  const paris = await client.callTool({ name: "forecast", arguments: { city: "Paris" } });
  assert.equal((paris.content as Text[])[0].text, "Paris: sunny, 18 °C");
  const oslo = await client.callTool({ name: "forecast", arguments: { city: "Oslo" } });
  assert.equal((oslo.content as Text[])[0].text, "Oslo: snow, 4 °C");

  const cities = await client.readResource({ uri: "weather://cities" });
  assert.deepEqual(JSON.parse((cities.contents[0] as { text: string }).text),
                   ["lima", "oslo", "paris"]);

  const prompt = await client.getPrompt({ name: "plan_trip", arguments: { city: "Oslo" } });
  assert.match((prompt.messages[0].content as Text).text, /3-day trip to Oslo/);
}

describe("the weather server, replayed over stdio", () => {
  let client: Client;

  before(async () => {
    // where the real server's command would go: mcprec replay CASSETTE
    const transport = new StdioClientTransport({
      command: MCPREC, args: ["replay", CASSETTE, "-s", "v1"], stderr: "inherit",
    });
    client = new Client({ name: "weather-tests", version: "1.0.0" });
    await client.connect(transport);
  });

  after(async () => {
    await client.close();
  });

  test("the server says who it is", () => {
    assert.equal(client.getServerVersion()?.name, "weather");
  });

  test("tools, resources and prompts answer as recorded", async () => {
    await checkTheRecordedAnswers(client);
  });

  test("a request the recording never saw is an error, not a hang", async () => {
    await assert.rejects(
      client.callTool({ name: "forecast", arguments: { city: "Atlantis" } }),
      /no recorded response matches/,
    );
  });
});

describe("the weather server, replayed over Streamable HTTP", () => {
  let replay: ChildProcess;
  let client: Client;

  before(async () => {
    // --listen on port 0: mcprec picks a free port and prints the URL on stdout
    replay = spawn(MCPREC, ["replay", CASSETTE, "-s", "v1", "--http", "--listen",
                            "127.0.0.1:0", "--allow-unmatched"],
                   { stdio: ["ignore", "pipe", "inherit"] });
    const [chunk] = (await once(replay.stdout!, "data")) as [Buffer];
    const url = new URL(chunk.toString().trim().split("\n")[0]);
    client = new Client({ name: "weather-tests-http", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(url));
  });

  after(async () => {
    await client.close();
    replay.kill("SIGTERM");
    await once(replay, "exit");
  });

  test("tools, resources and prompts answer as recorded", async () => {
    await checkTheRecordedAnswers(client);
  });
});
