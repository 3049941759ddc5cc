// examples/go-hello in TypeScript, answer for answer: for every Hello object
// a tenant creates, a ConfigMap with its greeting in the tenant's namespace
// on the platform cluster. It passes go-hello's shared cases
// (examples/go-hello/testdata/cases.json), natively and as a component.
import {
  type ApiKind, type CleanupPlan, type Descriptor, type Input, type Plan, type Provider,
  InvalidInput, exportProvider,
} from "@open-control-plane/service-provider-sdk";

const group = "hello.services.open-control-plane.io";
const configMaps: ApiKind = { group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true };

export const hello: Provider = {
  describe(): Descriptor {
    return {
      name: "hello",
      service: { group, version: "v1alpha1", kind: "Hello", plural: "hellos", namespaced: true },
      providerConfig: { group, version: "v1alpha1", kind: "ProviderConfig", plural: "providerconfigs", namespaced: false },
      finalizer: `${group}/finalizer`,
      crds: [],
      access: { controlPlaneRules: [], workloadCluster: false, workloadRules: [] },
      capabilities: [{ cluster: "platform", api: configMaps, scope: "tenant", names: ["hello"] }],
      observations: [],
    };
  },

  plan(input: Input): Plan {
    let service: { spec?: { greeting?: unknown } };
    try {
      service = JSON.parse(input.object);
    } catch (e) {
      throw new InvalidInput(`the Hello object is not valid JSON: ${(e as Error).message}`);
    }
    const greeting = typeof service.spec?.greeting === "string" ? service.spec.greeting : "";
    if (greeting === "") {
      throw new InvalidInput("spec.greeting is empty");
    }
    const manifest = {
      apiVersion: "v1", kind: "ConfigMap",
      metadata: { name: "hello", namespace: input.context.tenantNamespace },
      data: { greeting },
    };
    return {
      objects: [{ cluster: "platform", manifest: JSON.stringify(manifest) }],
      copies: [],
      status: {
        phase: "Ready",
        conditions: [{ type: "Ready", status: "True", reason: "Greeted", message: greeting }],
        resources: null,
      },
      requeueAfterSeconds: 0,
    };
  },

  cleanup(input: Input): CleanupPlan {
    return {
      teardown: {
        objects: [{
          cluster: "platform", apiVersion: "v1", kind: "ConfigMap", plural: "configmaps",
          namespace: input.context.tenantNamespace, name: "hello",
        }],
        copies: [],
        resources: null,
      },
    };
  },
};

export const provider = exportProvider(hello);
