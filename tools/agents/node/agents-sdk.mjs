// The OpenAI Agents SDK's agent loop with one function tool that runs a
// shell command, on the Responses API at OPENAI_BASE_URL.
import { execSync } from "node:child_process";
import { Agent, run, tool, setTracingDisabled } from "@openai/agents";
import { z } from "zod";

setTracingDisabled(true);

const runCommand = tool({
  name: "run_command",
  description: "Runs a shell command and returns what it printed.",
  parameters: z.object({ command: z.string() }),
  execute: async ({ command }) => execSync(command, { shell: "/bin/bash" }).toString(),
});

const agent = new Agent({
  name: "assistant",
  instructions: "Use run_command to run commands.",
  model: "gpt-5",
  tools: [runCommand],
});

const result = await run(agent, process.env.PROMPT);
console.log(result.finalOutput);
