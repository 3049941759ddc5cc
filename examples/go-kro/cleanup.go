package main

import (
	"fmt"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

// Deletion (as guest-kro/src/cleanup.rs): block while kro
// ResourceGraphDefinitions or Graphs exist on the ControlPlane, otherwise
// remove the HelmRelease (helm-controller uninstalls kro), then the
// OCIRepository, then the Secret copies.

// blockedRequeueSeconds is how long to wait before checking blockers again.
const blockedRequeueSeconds = 10

// Cleanup blocks while the ControlPlane still has ResourceGraphDefinitions
// or (kro v0.10) Graphs: removing kro first would orphan everything they
// manage. When the host could not look (no ControlPlane access any more),
// there is nothing left to protect and deletion proceeds.
func (kro) Cleanup(in sp.Input) (sp.CleanupPlan, error) {
	tenant := in.Context.TenantNamespace
	rgds, _ := in.ObservedObjects(observeRGDs)
	graphs, _ := in.ObservedObjects(observeGraphs)
	if len(rgds)+len(graphs) > 0 {
		what := fmt.Sprintf("%d kro ResourceGraphDefinition(s)", len(rgds))
		switch {
		case len(rgds) == 0:
			what = fmt.Sprintf("%d kro Graph(s)", len(graphs))
		case len(graphs) > 0:
			what = fmt.Sprintf("%d kro ResourceGraphDefinition(s) and %d Graph(s)", len(rgds), len(graphs))
		}
		return sp.Block(sp.Blocked{
			Message:             "deletion blocked: waiting for " + what + " to be removed from the control plane",
			RequeueAfterSeconds: blockedRequeueSeconds,
			Resources:           terminatingResources(tenant),
		}), nil
	}
	return sp.TearDown(sp.Teardown{
		Objects: []sp.ObjectRef{
			objectRef(sp.ClusterPlatform, helmAPIVersion, "HelmRelease", "helmreleases", tenant, helmRelease),
			objectRef(sp.ClusterPlatform, sourceAPIVersion, "OCIRepository", "ocirepositories", tenant, ociRepository),
		},
		Copies:    knownSecretCopies(in),
		Resources: terminatingResources(tenant),
	}), nil
}

func objectRef(cluster sp.Cluster, apiVersion, kind, plural, namespace, name string) sp.ObjectRef {
	return sp.ObjectRef{Cluster: cluster, APIVersion: apiVersion, Kind: kind, Plural: plural,
		Namespace: &namespace, Name: name}
}

// knownSecretCopies are the copies the current ProviderConfig implies for
// this instance. Deletion must not depend on the ProviderConfig (the
// version may be withdrawn, the config gone or broken), so anything
// unreadable yields nothing here; the host removes every copy it labelled
// for the instance anyway.
func knownSecretCopies(in sp.Input) []sp.ObjectRef {
	refs := []sp.ObjectRef{}
	requested, err := kroSpec(in.Object)
	if err != nil || in.ProviderConfig == nil {
		return refs
	}
	config, err := readProviderConfig(*in.ProviderConfig)
	if err != nil {
		return refs
	}
	v, err := resolveVersion(config, requested)
	if err != nil {
		return refs
	}
	images, err := imagePullSecrets(v.HelmValues)
	if err != nil {
		images = nil
	}
	for _, c := range secretCopies(v, images, in.Context.TenantNamespace) {
		// Copies on the ControlPlane are only worth naming while it is
		// reachable.
		if c.TargetCluster == sp.ClusterControlPlane && in.Context.ControlPlane == nil {
			continue
		}
		refs = append(refs, objectRef(c.TargetCluster, "v1", "Secret", "secrets", c.TargetNamespace, c.TargetName))
	}
	return refs
}
