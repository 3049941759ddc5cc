// The TypeScript SDK's runtime: a provider written against the contract's
// JSON form (index.d.ts) exported as the component's `provider` interface,
// in the shapes componentize-qjs maps WIT values to (variants as
// {tag, val}, enums as their case names, options as null).

export const CONTRACT_VERSION = "0.2.0";

export class InvalidInput extends Error {
  constructor(message, requeueAfterSeconds = 0) {
    super(message);
    this.name = "InvalidInput";
    this.requeueAfterSeconds = requeueAfterSeconds;
  }
}

export function planError(e) {
  if (e instanceof InvalidInput) {
    return { "invalid-input": { message: e.message, requeueAfterSeconds: e.requeueAfterSeconds } };
  }
  return { transient: e instanceof Error ? e.message : String(e) };
}

const variant = (value) => {
  if (typeof value === "string") return { tag: value };
  const [tag] = Object.keys(value);
  return { tag, val: value[tag] };
};

const scoped = (item) => ({ ...item, scope: variant(item.scope) });

const conditionStatus = { True: "true", False: "false", Unknown: "unknown" };

const resources = (list) => (list == null ? null : list.map((r) => ({
  apiGroup: r.apiGroup ?? null,
  kind: r.kind,
  name: r.name,
  namespace: r.namespace ?? null,
  phase: r.phase,
  message: r.message ?? null,
  location: r.location ?? null,
})));

function wirePlan(plan) {
  return {
    objects: plan.objects,
    copies: plan.copies.map((c) => ({ ...c, kind: variant(c.kind) })),
    status: {
      phase: plan.status.phase,
      conditions: plan.status.conditions.map((c) => ({ ...c, status: conditionStatus[c.status] })),
      resources: resources(plan.status.resources),
    },
    requeueAfterSeconds: plan.requeueAfterSeconds,
  };
}

function wireCleanup(plan) {
  const { tag, val } = variant(plan);
  return { tag, val: { ...val, resources: resources(val.resources) } };
}

function wireDescriptor(d) {
  const rules = (list) => list.map((r) => ({ resourceNames: [], ...r }));
  return {
    ...d,
    access: { ...d.access, controlPlaneRules: rules(d.access.controlPlaneRules), workloadRules: rules(d.access.workloadRules) },
    capabilities: d.capabilities.map(scoped),
    observations: d.observations.map(scoped),
  };
}

// A WIT result's error is thrown as the variant.
function failing(e) {
  const error = planError(e);
  return error.transient !== undefined
    ? { tag: "transient", val: error.transient }
    : { tag: "invalid-input", val: error["invalid-input"] };
}

// Calls the author's function, its result in the WIT shape; an error is
// thrown as the plan-error variant.
function calling(call, wire) {
  return (input) => {
    let answer;
    try {
      answer = call(input);
    } catch (e) {
      throw failing(e);
    }
    return wire(answer);
  };
}

export function exportProvider(provider) {
  return {
    describe: () => wireDescriptor(provider.describe()),
    plan: calling((input) => provider.plan(input), wirePlan),
    cleanup: calling((input) => provider.cleanup(input), wireCleanup),
  };
}
