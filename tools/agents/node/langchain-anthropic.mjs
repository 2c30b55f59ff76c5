// LangChain's ChatAnthropic in a tool loop: the model's tool call runs a
// shell command, its output goes back as a ToolMessage, and the final
// answer is printed with its stop reason and stop sequence.
import { execSync } from "node:child_process";
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";

const runCommand = tool(async ({ command }) => execSync(command, { shell: "/bin/bash" }).toString(), {
  name: "run_command",
  description: "Runs a shell command and returns what it printed.",
  schema: z.object({ command: z.string() }),
});

const model = new ChatAnthropic({
  model: "claude-sonnet-4-5",
  anthropicApiUrl: process.env.ANTHROPIC_BASE_URL,
  apiKey: process.env.ANTHROPIC_API_KEY,
  maxTokens: 1024,
  stopSequences: ["END-OF-ANSWER"],
  maxRetries: 0,
});
const withTools = model.bindTools([runCommand]);
const messages = [new HumanMessage(process.env.PROMPT)];
const first = await withTools.invoke(messages);
messages.push(first);
for (const call of first.tool_calls ?? []) {
  messages.push(new ToolMessage({ content: await runCommand.invoke(call.args), tool_call_id: call.id }));
}
const last = await withTools.invoke(messages);
console.log(last.content);
console.log(`stop_reason=${last.response_metadata.stop_reason} stop_sequence=${last.response_metadata.stop_sequence}`);
