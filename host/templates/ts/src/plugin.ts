// The __NAME__ plugin: for every __KIND__ a tenant creates, a ConfigMap
// with its greeting in the tenant's namespace on the platform cluster.
import {
  type ApiKind, type CleanupPlan, type Descriptor, type Input, type Plan, type Provider,
  InvalidInput, exportProvider,
} from "@open-control-plane/service-provider-sdk";
import { PROVIDER_CONFIG_CRD, SERVICE_CRD } from "./crds.generated.js";

export const GROUP = "__GROUP__";
/** The one object each instance gets: a ConfigMap of this name. */
export const CONFIG_MAP = "__NAME__";

const configMaps: ApiKind = { group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true };

export const plugin: Provider = {
  describe(): Descriptor {
    return {
      name: "__NAME__",
      service: { group: GROUP, version: "v1alpha1", kind: "__KIND__", plural: "__PLURAL__", namespaced: true },
      providerConfig: { group: GROUP, version: "v1alpha1", kind: "ProviderConfig", plural: "providerconfigs", namespaced: false },
      finalizer: `${GROUP}/finalizer`,
      crds: [
        { cluster: "onboarding", manifest: SERVICE_CRD },
        { cluster: "platform", manifest: PROVIDER_CONFIG_CRD },
      ],
      access: { controlPlaneRules: [], workloadCluster: false, workloadRules: [] },
      capabilities: [{ cluster: "platform", api: configMaps, scope: "tenant", names: [CONFIG_MAP] }],
      observations: [],
    };
  },

  plan(input: Input): Plan {
    let service: { spec?: { greeting?: unknown } };
    try {
      service = JSON.parse(input.object);
    } catch (e) {
      throw new InvalidInput(`the __KIND__ is not valid: ${(e as Error).message}`);
    }
    const greeting = typeof service.spec?.greeting === "string" ? service.spec.greeting.trim() : "";
    if (greeting === "") {
      throw new InvalidInput("spec.greeting is empty");
    }
    const configMap = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: CONFIG_MAP, namespace: input.context.tenantNamespace },
      data: { greeting },
    };
    return {
      objects: [{ cluster: "platform", manifest: JSON.stringify(configMap) }],
      copies: [],
      status: {
        phase: "Ready",
        conditions: [{ type: "Ready", status: "True", reason: "Greeted", message: greeting }],
        resources: null,
      },
      requeueAfterSeconds: 300,
    };
  },

  cleanup(input: Input): CleanupPlan {
    return {
      teardown: {
        objects: [{
          cluster: "platform", apiVersion: "v1", kind: "ConfigMap", plural: "configmaps",
          namespace: input.context.tenantNamespace, name: CONFIG_MAP,
        }],
        copies: [],
        resources: null,
      },
    };
  },
};

/** The component's export, named after the contract's interface. */
export const provider = exportProvider(plugin);
