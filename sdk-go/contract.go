package serviceprovider

// Provider is a plugin: what it needs (Describe, asked once when the host
// loads it), what one service object should look like (Plan), and how it is
// taken down (Cleanup). Plan and Cleanup get everything as input and do no
// I/O; the host applies their answers.
//
// Errors: return an *InvalidInputError (see [InvalidInput]) when the tenant
// must change the object, and anything else for a transient failure the
// host retries.
type Provider interface {
	Describe() Descriptor
	Plan(Input) (Plan, error)
	Cleanup(Input) (CleanupPlan, error)
}

// Cluster is one of the clusters a provider deals with (openmcp terms).
type Cluster string

const (
	// ClusterPlatform runs the provider, Flux and the tenant namespaces.
	ClusterPlatform Cluster = "platform"
	// ClusterOnboarding is where tenants create service objects.
	ClusterOnboarding Cluster = "onboarding"
	// ClusterControlPlane is the tenant's ControlPlane, reached through an
	// AccessRequest.
	ClusterControlPlane Cluster = "control-plane"
	// ClusterWorkload is an optional workload cluster.
	ClusterWorkload Cluster = "workload"
)

// APIKind is a Kubernetes API kind with the plural its REST path needs.
type APIKind struct {
	// Group is empty for the core group.
	Group      string `json:"group"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Plural     string `json:"plural"`
	Namespaced bool   `json:"namespaced"`
}

// APIVersion is `group/version`, or `version` for the core group.
func (k APIKind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// CRD is a CustomResourceDefinition the plugin brings, and where `init`
// installs it.
type CRD struct {
	Cluster Cluster `json:"cluster"`
	// Manifest is the full CRD, YAML or JSON.
	Manifest string `json:"manifest"`
}

// PolicyRule is an RBAC rule (rbac.authorization.k8s.io/v1).
type PolicyRule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	// ResourceNames empty means all names.
	ResourceNames []string `json:"resourceNames,omitempty"`
	Verbs         []string `json:"verbs"`
}

// Rule is a PolicyRule for all names.
func Rule(apiGroups, resources, verbs []string) PolicyRule {
	return PolicyRule{APIGroups: apiGroups, Resources: resources, Verbs: verbs}
}

// Access is the cluster access a plugin needs per service instance.
type Access struct {
	// ControlPlaneRules are the rules of the token the host requests on the
	// tenant's ControlPlane; the plugin's objects (e.g. a HelmRelease) use
	// the same kubeconfig, so they must cover what those install.
	ControlPlaneRules []PolicyRule `json:"controlPlaneRules"`
	WorkloadCluster   bool         `json:"workloadCluster"`
	WorkloadRules     []PolicyRule `json:"workloadRules"`
}

// NamespaceScope says which namespaces a capability or an observation
// covers: [Tenant], [Named], [ClusterScoped] or [AnyNamespace].
type NamespaceScope struct {
	kind scopeKind
	name string
}

type scopeKind uint8

const (
	scopeTenant scopeKind = iota
	scopeNamed
	scopeClusterScoped
	scopeAny
)

// Tenant is the instance's tenant namespace `mcp--<uuid>` (platform cluster).
func Tenant() NamespaceScope { return NamespaceScope{kind: scopeTenant} }

// Named is exactly the namespace name.
func Named(name string) NamespaceScope { return NamespaceScope{kind: scopeNamed, name: name} }

// ClusterScoped is for cluster-scoped objects; for an observation of a
// namespaced kind, every namespace.
func ClusterScoped() NamespaceScope { return NamespaceScope{kind: scopeClusterScoped} }

// AnyNamespace is any namespace (e.g. one the ProviderConfig names).
func AnyNamespace() NamespaceScope { return NamespaceScope{kind: scopeAny} }

// Namespace is the namespace of a [Named] scope, and false for the others.
func (s NamespaceScope) Namespace() (string, bool) { return s.name, s.kind == scopeNamed }

// Capability lets the plugin's plans write one kind on one cluster. The
// platform operator's grant narrows it; the host enforces it.
type Capability struct {
	Cluster Cluster        `json:"cluster"`
	API     APIKind        `json:"api"`
	Scope   NamespaceScope `json:"scope"`
	// Names empty means any name.
	Names []string `json:"names"`
}

// Stage says when an observation is read.
type Stage string

const (
	StageReconcile Stage = "reconcile"
	StageCleanup   Stage = "cleanup"
	StageAlways    Stage = "always"
)

// Detail says how much of an observed object the plugin gets.
type Detail string

const (
	DetailFull     Detail = "full"
	DetailMetadata Detail = "metadata"
)

// Observation is something the host reads for the plugin before a call and
// hands over in [Input.Observed].
type Observation struct {
	ID      string         `json:"id"`
	Cluster Cluster        `json:"cluster"`
	API     APIKind        `json:"api"`
	Scope   NamespaceScope `json:"scope"`
	// Name nil means every object in scope.
	Name   *string `json:"name"`
	Stage  Stage   `json:"stage"`
	Detail Detail  `json:"detail"`
}

// Descriptor is what a plugin is and needs.
type Descriptor struct {
	Name           string        `json:"name"`
	Service        APIKind       `json:"service"`
	ProviderConfig APIKind       `json:"providerConfig"`
	Finalizer      string        `json:"finalizer"`
	CRDs           []CRD         `json:"crds"`
	Access         Access        `json:"access"`
	Capabilities   []Capability  `json:"capabilities"`
	Observations   []Observation `json:"observations"`
}

// KubeconfigRef names the Secret key holding a kubeconfig.
type KubeconfigRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// Context is what the host knows about the instance.
type Context struct {
	ProviderName    string `json:"providerName"`
	TenantNamespace string `json:"tenantNamespace"`
	PodNamespace    string `json:"podNamespace"`
	// ControlPlane is nil until the AccessRequest is granted.
	ControlPlane *KubeconfigRef `json:"controlPlane"`
	Workload     *KubeconfigRef `json:"workload"`
}

// Observed is what the host read for one observation.
type Observed struct {
	ID string `json:"id"`
	// Objects are JSON documents.
	Objects []string `json:"objects"`
}

// Input is one call's input.
type Input struct {
	// Object is the service object as JSON.
	Object string `json:"object"`
	// ProviderConfig is the ProviderConfig as JSON, nil if there is none.
	ProviderConfig *string    `json:"providerConfig"`
	Context        Context    `json:"context"`
	Observed       []Observed `json:"observed"`
}

// ObservedObjects is what the host read for the observation id, and false
// if it read nothing for it (e.g. no access to that cluster yet).
func (in Input) ObservedObjects(id string) ([]string, bool) {
	for _, o := range in.Observed {
		if o.ID == id {
			return o.Objects, true
		}
	}
	return nil, false
}

// DesiredObject is an object the plan wants to exist, as JSON or YAML.
type DesiredObject struct {
	Cluster  Cluster `json:"cluster"`
	Manifest string  `json:"manifest"`
}

// CopyKind is what an [ObjectCopy] copies: a Secret of a required type, or
// a ConfigMap.
type CopyKind struct {
	secret     bool
	secretType string
}

// SecretOfType is a Secret whose `type` must be requiredType.
func SecretOfType(requiredType string) CopyKind {
	return CopyKind{secret: true, secretType: requiredType}
}

// ConfigMapKind is a ConfigMap.
func ConfigMapKind() CopyKind { return CopyKind{} }

// Kind is `Secret` or `ConfigMap`.
func (k CopyKind) Kind() string {
	if k.secret {
		return "Secret"
	}
	return "ConfigMap"
}

// SecretType is the required Secret type, and false for a ConfigMap.
func (k CopyKind) SecretType() (string, bool) { return k.secretType, k.secret }

// ObjectCopy asks the host to copy a Secret or ConfigMap from the
// onboarding namespace of the service object to another cluster.
type ObjectCopy struct {
	Kind            CopyKind `json:"kind"`
	SourceName      string   `json:"sourceName"`
	TargetCluster   Cluster  `json:"targetCluster"`
	TargetNamespace string   `json:"targetNamespace"`
	TargetName      string   `json:"targetName"`
}

// CopySecret copies the Secret source, which must have requiredType.
func CopySecret(source, requiredType string, cluster Cluster, namespace, name string) ObjectCopy {
	return ObjectCopy{SecretOfType(requiredType), source, cluster, namespace, name}
}

// CopyConfigMap copies the ConfigMap source.
func CopyConfigMap(source string, cluster Cluster, namespace, name string) ObjectCopy {
	return ObjectCopy{ConfigMapKind(), source, cluster, namespace, name}
}

// ObjectRef names one object on one cluster.
type ObjectRef struct {
	Cluster    Cluster `json:"cluster"`
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Plural     string  `json:"plural"`
	// Namespace is nil for a cluster-scoped object.
	Namespace *string `json:"namespace"`
	Name      string  `json:"name"`
}

// ConditionStatus is a Kubernetes condition status.
type ConditionStatus string

const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one status condition; the host adds the transition time and
// the observed generation. A status holds at most 16.
type Condition struct {
	// Type is a qualified name (`Ready`, `example.com/Installed`).
	Type   string          `json:"type"`
	Status ConditionStatus `json:"status"`
	// Reason is one CamelCase word (letters, digits, `_`, `,`, `:`).
	Reason string `json:"reason"`
	// Message is any text; the host cuts it at 32 KiB and blanks control
	// characters other than line breaks and tabs.
	Message string `json:"message"`
}

// ResourceStatus is one entry of `status.resources`.
type ResourceStatus struct {
	APIGroup  *string `json:"apiGroup,omitempty"`
	Kind      string  `json:"kind"`
	Name      string  `json:"name"`
	Namespace *string `json:"namespace,omitempty"`
	Phase     string  `json:"phase"`
	Message   *string `json:"message,omitempty"`
	Location  *string `json:"location,omitempty"`
}

// ServiceStatus is the status the host writes to the service object.
type ServiceStatus struct {
	Phase      string      `json:"phase"`
	Conditions []Condition `json:"conditions"`
	// Resources nil leaves `status.resources` as it is; a non-nil slice,
	// even empty, replaces it.
	Resources []ResourceStatus `json:"resources"`
}

// Plan is the answer to a reconcile: the objects that should exist (the
// host removes what it applied before and the plan no longer lists), the
// copies, the status, and when to look again (0: only on change).
type Plan struct {
	Objects             []DesiredObject `json:"objects"`
	Copies              []ObjectCopy    `json:"copies"`
	Status              ServiceStatus   `json:"status"`
	RequeueAfterSeconds uint32          `json:"requeueAfterSeconds"`
}

// Blocked keeps a deletion waiting, and says why.
type Blocked struct {
	Message             string           `json:"message"`
	RequeueAfterSeconds uint32           `json:"requeueAfterSeconds"`
	Resources           []ResourceStatus `json:"resources"`
}

// Teardown is the order of a deletion: each object gone before the next,
// then the copies.
type Teardown struct {
	Objects   []ObjectRef      `json:"objects"`
	Copies    []ObjectRef      `json:"copies"`
	Resources []ResourceStatus `json:"resources"`
}

// CleanupPlan is the answer to a deletion: [Block] or [TearDown].
type CleanupPlan struct {
	blocked  *Blocked
	teardown *Teardown
}

// Block keeps the deletion waiting.
func Block(b Blocked) CleanupPlan { return CleanupPlan{blocked: &b} }

// TearDown lets the deletion go on.
func TearDown(t Teardown) CleanupPlan { return CleanupPlan{teardown: &t} }

// Blocked is the plan's Blocked, if it blocks.
func (p CleanupPlan) Blocked() (Blocked, bool) {
	if p.blocked == nil {
		return Blocked{}, false
	}
	return *p.blocked, true
}

// Teardown is the plan's Teardown, if it tears down. The zero CleanupPlan
// tears down nothing.
func (p CleanupPlan) Teardown() (Teardown, bool) {
	if p.blocked != nil {
		return Teardown{}, false
	}
	if p.teardown == nil {
		return Teardown{}, true
	}
	return *p.teardown, true
}
