// A TypeScript program against the shipped .d.ts (tsc --noEmit in .ci/js-sdk):
// the package's types must fit the SDKs' own interfaces.
import type { Session, OpenAIResponsesCompactionAwareSession } from "@openai/agents";
import type { LanguageModelMiddleware } from "ai";
import type { SessionStore } from "@anthropic-ai/claude-agent-sdk";
import { RecallClient, NotFound, events } from "@recallhq/recall";
import { RecallSession } from "@recallhq/recall/agents";
import { recallMiddleware, recallPrepareStep } from "@recallhq/recall/ai";
import { RecallSessionStore } from "@recallhq/recall/claude";

const client = new RecallClient({ url: "http://127.0.0.1:8080", token: null });
const session: Session = new RecallSession({ sessionId: "s", client });
const aware: OpenAIResponsesCompactionAwareSession = new RecallSession({ sessionId: "s" });
const middleware: LanguageModelMiddleware = recallMiddleware({ sessionId: "s", client });
const store: SessionStore = new RecallSessionStore({ client });
const prepare = recallPrepareStep({ sessionId: "s" });

async function main(): Promise<string> {
  const r = await client.publish([events.message("s", "user", "hi", { uuid: "u1" })]);
  const n: number = r.status;
  const c = await client.compact("s", { preview: true });
  const served: boolean = c.served;
  try {
    await client.memory("s");
  } catch (err) {
    if (err instanceof NotFound) return "none";
  }
  void [session, aware, middleware, store, prepare, n, served];
  return "ok";
}
void main;
