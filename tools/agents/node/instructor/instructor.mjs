// Instructor's structured extraction in TOOLS mode on chat completions:
// the answer is a forced function call whose arguments match the schema.
import Instructor from "@instructor-ai/instructor";
import OpenAI from "openai";
import { z } from "zod";

const oai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const client = Instructor({ client: oai, mode: "TOOLS" });
const Answer = z.object({ command: z.string().describe("the command to run") });
const answer = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: process.env.PROMPT }],
  response_model: { schema: Answer, name: "Answer" },
  max_retries: 0,
});
console.log(JSON.stringify(answer));
