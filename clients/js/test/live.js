// Shared by the tests against a real `recall up` (RECALL_HTTP): they are
// skipped, saying so, when it is not set.
import { randomUUID } from "node:crypto";
import { RecallClient } from "../src/index.js";

export const RECALL_HTTP = process.env.RECALL_HTTP ?? "";
export const live = RECALL_HTTP ? {} : { skip: "RECALL_HTTP is not set: no recall up to test against" };
export const client = () => new RecallClient({ url: RECALL_HTTP, token: process.env.RECALL_TOKEN || null, timeoutMs: 45_000, retryForMs: 90_000 });
export const sessionName = (prefix) => `${prefix}-${randomUUID().slice(0, 8)}`;

/** A tool output of about n characters naming its turn (the history grows fast). */
export const toolOutput = (turn, n = 2400) => `value-${turn}: ` + `line ${turn} of the build log, nothing failed here\n`.repeat(Math.ceil(n / 48));
