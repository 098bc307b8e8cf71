// @recallhq/recall: a typed client of Recall's HTTP edge (docs/api.md) and
// the adapters for agent SDKs (./agents, ./ai, ./claude subpaths).
export { RecallClient } from "./client.js";
export * from "./errors.js";
export * as events from "./events.js";
export {} from "./types.js";
