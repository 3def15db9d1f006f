/** `@sidestream/client`: the key codec, the index reader and the counters' client in one import (each also at `@sidestream/client/keys`, `/index`, `/counters`). */

export * from "./keys.js";
export * from "./index.js";
export * from "./counters.js";
