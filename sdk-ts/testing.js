// Shared cases, natively: the same JSON file `service-provider-host plugin
// test` runs through the component, and the Rust and Go SDKs read.
import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { planError } from "./index.js";

function answer(provider, c) {
  try {
    const ok = c.call === "plan" ? provider.plan(c.input) : provider.cleanup(c.input);
    return { ok };
  } catch (e) {
    return { err: planError(e) };
  }
}

// Every "manifest" string holding JSON replaced by its value; undefined
// fields dropped, as JSON drops them.
function normal(value) {
  if (Array.isArray(value)) return value.map(normal);
  if (value && typeof value === "object") {
    const out = {};
    for (const [key, field] of Object.entries(value)) {
      if (field === undefined) continue;
      if (key === "manifest" && typeof field === "string") {
        try {
          out[key] = JSON.parse(field);
          continue;
        } catch {}
      }
      out[key] = normal(field);
    }
    return out;
  }
  return value;
}

export function checkShared(provider, path) {
  const cases = JSON.parse(readFileSync(path, "utf8"));
  if (!Array.isArray(cases) || cases.length === 0) throw new Error(`${path} holds no cases`);
  const differing = [];
  for (const c of cases) {
    const got = answer(provider, c);
    if (!isDeepStrictEqual(normal(JSON.parse(JSON.stringify(got))), normal(c.expected))) {
      differing.push(`case ${JSON.stringify(c.name)}: answers differ\nwant: ${JSON.stringify(c.expected)}\n got: ${JSON.stringify(got)}`);
    }
  }
  return differing;
}
