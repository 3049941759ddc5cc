import { test } from "node:test";
import assert from "node:assert/strict";
import { InvalidInput, type Input } from "@open-control-plane/service-provider-sdk";
import { checkShared } from "@open-control-plane/service-provider-sdk/testing";
import { plugin } from "./plugin.js";

const input = (spec: object): Input => ({
  object: JSON.stringify({ spec }),
  providerConfig: null,
  context: { providerName: "__NAME__", tenantNamespace: "mcp--tenant", podNamespace: "openmcp-system", controlPlane: null, workload: null },
  observed: [],
});

test("a greeting becomes a ConfigMap in the tenant namespace", () => {
  const plan = plugin.plan(input({ greeting: "hello" }));
  const manifest = JSON.parse(plan.objects[0].manifest);
  assert.equal(manifest.metadata.namespace, "mcp--tenant");
  assert.equal(manifest.data.greeting, "hello");
});

test("an empty greeting is the tenant's to fix", () => {
  assert.throws(() => plugin.plan(input({ greeting: " " })), InvalidInput);
});

// The shared cases: the same file `service-provider-host plugin test` runs
// through the built component.
test("the shared cases get their answers", () => {
  assert.deepEqual(checkShared(plugin, "testdata/cases.json"), []);
});
