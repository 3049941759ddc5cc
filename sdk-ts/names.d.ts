/** Kubernetes' limit for names and label values. */
export declare const MAX_LENGTH: 63;
/** What every tenant namespace on the platform starts with. */
export declare const TENANT_NAMESPACE_PREFIX: "mcp--";
/** controller-utils' K8sNameUUID: a version-8 UUID from the SHAKE128 hash of the parts joined with "/". Throws when every part is empty. */
export declare function k8sNameUUID(...parts: string[]): string;
/** openmcp's StableMCPNamespace: the tenant namespace of the ControlPlane (and so of the service object) namespace/name. */
export declare function tenantNamespace(name: string, namespace: string): string;
/** controller-utils' ShortenToXCharacters: a name longer than limit keeps a prefix and gets "--" and 8 characters of its hash. */
export declare function shorten(name: string, limit: number): string;
/** openmcp's StableRequestName: the AccessRequest a provider creates for one service instance. */
export declare function accessRequestName(controller: string, instance: string, suffix: string): string;
/** A label value shortened the way openmcp does (63 characters). */
export declare function labelValue(value: string): string;
/** A provider's name for a copied object, "sp-<provider>-<source>". */
export declare function prefixedCopyName(provider: string, source: string): string;
