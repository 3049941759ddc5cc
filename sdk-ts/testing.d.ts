import type { Provider } from "./index.js";

/** Runs every shared case of the JSON file at `path` (name, call, input, expected) through `provider` natively; returns one message per case whose answer differs (empty: all agree). Throws when the file holds no cases. */
export declare function checkShared(provider: Provider, path: string): string[];
