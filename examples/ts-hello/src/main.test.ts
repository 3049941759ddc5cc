import { test } from "node:test";
import assert from "node:assert/strict";
import { checkShared } from "@open-control-plane/service-provider-sdk/testing";
import { hello } from "./main.js";

test("go-hello's shared cases get go-hello's answers", () => {
  assert.deepEqual(checkShared(hello, "../go-hello/testdata/cases.json"), []);
});
