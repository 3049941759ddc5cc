// The Rust and Go SDKs' test vectors (sdk/src/names.rs, sdk-go/names).
import { test } from "node:test";
import assert from "node:assert/strict";
import { accessRequestName, k8sNameUUID, prefixedCopyName, shorten, tenantNamespace } from "./names.js";

test("UUIDs match upstream", () => {
  assert.equal(k8sNameUUID("example"), "23cc2129-a257-8644-95e0-289d55c69704");
  assert.equal(k8sNameUUID("default", "example"), "2bcf790e-815e-8ea9-857b-15be429583a5");
  assert.throws(() => k8sNameUUID("", ""));
});

test("tenant namespaces match upstream", () => {
  assert.equal(tenantNamespace("test-mcp", "default"), "mcp--eaedbc8f-bfe8-889c-bc87-4958803d9f94");
  assert.equal(tenantNamespace("mcp-01", "default"), "mcp--4b6f2253-c68f-836b-927e-f2ee28e25584");
});

test("shortening matches the Rust SDK", () => {
  assert.equal(shorten("abc", 63), "abc");
  assert.equal(shorten("a".repeat(63), 63), "a".repeat(63));
  assert.equal(shorten(`${"x".repeat(50)}-${"y".repeat(50)}`, 63), `${"x".repeat(50)}-yy--emohweya`);
  assert.equal(shorten(`${"a".repeat(51)}-.${"b".repeat(40)}`, 63), `${"a".repeat(51)}--jyhdkwyj`);
});

test("access request names follow openmcp", () => {
  const controller = "kro.services.open-control-plane.io";
  assert.equal(accessRequestName(controller, "test-mcp", "mcp"), `${controller}--test-mcp--mcp`);
  assert.equal(accessRequestName(controller, "n".repeat(63), "mcp"), `${controller}--nnnnnnnnnnnn--rallaaej--mcp`);
  assert.equal(accessRequestName("Flux", "My", "mcp"), "flux--my--mcp");
  assert.equal(prefixedCopyName("kro", "registry"), "sp-kro-registry");
});
