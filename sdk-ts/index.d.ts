// The plugin contract (wit/service-provider.wit, open-control-plane:service-provider@0.2.0)
// in its JSON form: the same field names and values the Rust and Go SDKs
// use, and shared cases are written in. `exportProvider` turns a provider
// of these types into the component's `provider` export.

/** The contract version these types implement. */
export declare const CONTRACT_VERSION: "0.2.0";

export type Cluster = "platform" | "onboarding" | "control-plane" | "workload";

export interface ApiKind {
  /** Empty for the core group. */
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export interface Crd {
  cluster: Cluster;
  /** The whole CRD, YAML or JSON. */
  manifest: string;
}

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}

export interface Access {
  controlPlaneRules: PolicyRule[];
  workloadCluster: boolean;
  workloadRules: PolicyRule[];
}

export type NamespaceScope = "tenant" | { named: string } | "cluster-scoped" | "any";

export interface Capability {
  cluster: Cluster;
  api: ApiKind;
  scope: NamespaceScope;
  names: string[];
}

export type Stage = "reconcile" | "cleanup" | "always";
export type Detail = "full" | "metadata";

export interface Observation {
  id: string;
  cluster: Cluster;
  api: ApiKind;
  scope: NamespaceScope;
  name: string | null;
  stage: Stage;
  detail: Detail;
}

export interface Descriptor {
  name: string;
  service: ApiKind;
  providerConfig: ApiKind;
  finalizer: string;
  crds: Crd[];
  access: Access;
  capabilities: Capability[];
  observations: Observation[];
}

export interface KubeconfigRef {
  namespace: string;
  name: string;
  key: string;
}

export interface Context {
  providerName: string;
  tenantNamespace: string;
  podNamespace: string;
  controlPlane: KubeconfigRef | null;
  workload: KubeconfigRef | null;
}

export interface Observed {
  id: string;
  /** Each object as JSON text. */
  objects: string[];
}

export interface Input {
  /** The service object as JSON text. */
  object: string;
  providerConfig: string | null;
  context: Context;
  observed: Observed[];
}

export interface DesiredObject {
  cluster: Cluster;
  /** The object as JSON text. */
  manifest: string;
}

export type CopyKind = { secret: string } | "config-map";

export interface ObjectCopy {
  kind: CopyKind;
  sourceName: string;
  targetCluster: Cluster;
  targetNamespace: string;
  targetName: string;
}

export interface ObjectRef {
  cluster: Cluster;
  apiVersion: string;
  kind: string;
  plural: string;
  namespace: string | null;
  name: string;
}

export type ConditionStatus = "True" | "False" | "Unknown";

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
}

export interface ResourceStatus {
  apiGroup?: string;
  kind: string;
  name: string;
  namespace?: string;
  phase: string;
  message?: string;
  location?: string;
}

export interface ServiceStatus {
  phase: string;
  conditions: Condition[];
  resources: ResourceStatus[] | null;
}

export interface Plan {
  objects: DesiredObject[];
  copies: ObjectCopy[];
  status: ServiceStatus;
  requeueAfterSeconds: number;
}

export interface Blocked {
  message: string;
  requeueAfterSeconds: number;
  resources: ResourceStatus[] | null;
}

export interface Teardown {
  objects: ObjectRef[];
  copies: ObjectRef[];
  resources: ResourceStatus[] | null;
}

export type CleanupPlan = { blocked: Blocked } | { teardown: Teardown };

/** What a plugin implements. Throw an InvalidInput for what the tenant must fix; any other error is transient (retried with backoff). */
export interface Provider {
  describe(): Descriptor;
  plan(input: Input): Plan;
  cleanup(input: Input): CleanupPlan;
}

/** The tenant (or the platform operator) must change the object: shown in its status, looked at again after requeueAfterSeconds (0: only on change). */
export declare class InvalidInput extends Error {
  constructor(message: string, requeueAfterSeconds?: number);
  readonly requeueAfterSeconds: number;
}

/** A plan error in its JSON form: `{"invalid-input": …}` or `{"transient": "…"}`. */
export type PlanError = { "invalid-input": { message: string; requeueAfterSeconds: number } } | { transient: string };

/** The error `e` as the host will see it. */
export declare function planError(e: unknown): PlanError;

/** The component's `provider` export: `export const provider = exportProvider(myProvider);`. */
export declare function exportProvider(provider: Provider): unknown;
