package main

import (
	_ "embed"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

// The plugin's self-description: what it serves, what it needs from the
// host, and the allow-list of everything it may ask the host to touch (as
// guest-kro/src/describe.rs).

const (
	group     = "kro.services.open-control-plane.io"
	version   = "v1alpha1"
	finalizer = group + "/finalizer"

	// Observation ids.
	observeOCIRepository = "oci-repository"
	observeHelmRelease   = "helm-release"
	observeRGDs          = "resource-graph-definitions"
	observeGraphs        = "graphs"
)

// The CRDs, copies of ../../crds/ (go:embed cannot reach outside the
// module; `task generate` refreshes them and CI fails when they are stale).
var (
	//go:embed crds/kro.services.open-control-plane.io_kroes.yaml
	kroCRD string
	//go:embed crds/kro.services.open-control-plane.io_providerconfigs.yaml
	providerConfigCRD string
)

var (
	ociRepositoryKind = sp.APIKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository",
		Plural: "ocirepositories", Namespaced: true}
	helmReleaseKind = sp.APIKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease",
		Plural: "helmreleases", Namespaced: true}
	secretKind    = sp.APIKind{Version: "v1", Kind: "Secret", Plural: "secrets", Namespaced: true}
	namespaceKind = sp.APIKind{Version: "v1", Kind: "Namespace", Plural: "namespaces"}
	rgdKind       = sp.APIKind{Group: "kro.run", Version: "v1alpha1", Kind: "ResourceGraphDefinition",
		Plural: "resourcegraphdefinitions"}
	// kro v0.10's Graph (namespaced, behind kro's GraphKind feature gate).
	graphKind = sp.APIKind{Group: "kro.run", Version: "v1alpha1", Kind: "Graph", Plural: "graphs", Namespaced: true}
)

// controlPlaneRules is what the ControlPlane token may do: install the kro
// chart through the HelmRelease (CRDs, RBAC, Deployment, Service, Helm's
// release Secrets; kro's ClusterRole needs escalate and bind, named as the
// host requires of every verb that is power over the cluster) and the
// host's own work there.
func controlPlaneRules() []sp.PolicyRule {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	rbac := []string{"get", "list", "watch", "create", "update", "patch", "delete", "escalate", "bind"}
	read := []string{"get", "list", "watch"}
	return []sp.PolicyRule{
		sp.Rule([]string{""}, []string{"namespaces"}, all),
		sp.Rule([]string{""}, []string{"secrets", "configmaps", "serviceaccounts", "services"}, all),
		sp.Rule([]string{"apps"}, []string{"deployments"}, all),
		// helm-controller's readiness wait reads ReplicaSets and Pods.
		sp.Rule([]string{"apps"}, []string{"replicasets"}, read),
		sp.Rule([]string{""}, []string{"pods"}, read),
		sp.Rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, all),
		sp.Rule([]string{"rbac.authorization.k8s.io"},
			[]string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, rbac),
		sp.Rule([]string{"kro.run"}, []string{"resourcegraphdefinitions", "graphs"}, read),
	}
}

func ptr(s string) *string { return &s }

func (kro) Describe() sp.Descriptor {
	return sp.Descriptor{
		Name:           "kro",
		Service:        sp.APIKind{Group: group, Version: version, Kind: "Kro", Plural: "kroes", Namespaced: true},
		ProviderConfig: sp.APIKind{Group: group, Version: version, Kind: "ProviderConfig", Plural: "providerconfigs"},
		Finalizer:      finalizer,
		CRDs: []sp.CRD{
			{Cluster: sp.ClusterOnboarding, Manifest: kroCRD},
			{Cluster: sp.ClusterPlatform, Manifest: providerConfigCRD},
		},
		Access: sp.Access{ControlPlaneRules: controlPlaneRules()},
		Capabilities: []sp.Capability{
			{Cluster: sp.ClusterPlatform, API: ociRepositoryKind, Scope: sp.Tenant(), Names: []string{ociRepository}},
			{Cluster: sp.ClusterPlatform, API: helmReleaseKind, Scope: sp.Tenant(), Names: []string{helmRelease}},
			{Cluster: sp.ClusterPlatform, API: secretKind, Scope: sp.Tenant()},
			{Cluster: sp.ClusterControlPlane, API: namespaceKind, Scope: sp.ClusterScoped(), Names: []string{kroSystem}},
			{Cluster: sp.ClusterControlPlane, API: secretKind, Scope: sp.Named(kroSystem)},
		},
		Observations: []sp.Observation{
			{ID: observeOCIRepository, Cluster: sp.ClusterPlatform, API: ociRepositoryKind, Scope: sp.Tenant(),
				Name: ptr(ociRepository), Stage: sp.StageReconcile, Detail: sp.DetailFull},
			{ID: observeHelmRelease, Cluster: sp.ClusterPlatform, API: helmReleaseKind, Scope: sp.Tenant(),
				Name: ptr(helmRelease), Stage: sp.StageReconcile, Detail: sp.DetailFull},
			{ID: observeRGDs, Cluster: sp.ClusterControlPlane, API: rgdKind, Scope: sp.ClusterScoped(),
				Stage: sp.StageCleanup, Detail: sp.DetailMetadata},
			{ID: observeGraphs, Cluster: sp.ClusterControlPlane, API: graphKind, Scope: sp.AnyNamespace(),
				Stage: sp.StageCleanup, Detail: sp.DetailMetadata},
		},
	}
}
