package main

import (
	"encoding/json"

	sp "open-control-plane.io/service-provider-host/sdk-go"
	"open-control-plane.io/service-provider-host/sdk-go/names"
)

// The desired state of one Kro instance: the Flux objects on the platform
// cluster, the kro-system namespace on the ControlPlane and the Secret
// copies the host performs (as guest-kro/src/desired.rs).

const (
	// ociRepository and helmRelease are the Flux objects' names in the
	// tenant namespace.
	ociRepository = "kro-oci-repository"
	helmRelease   = "kro-helm-release"
	// kroSystem is the namespace on the ControlPlane kro is installed into.
	kroSystem   = "kro-system"
	releaseName = "kro"
	// fluxInterval is spelled as the Go provider's metav1.Duration
	// serializes it, so that its objects are taken over unchanged.
	fluxInterval     = "1m0s"
	dockerConfigJSON = "kubernetes.io/dockerconfigjson"
	sourceAPIVersion = "source.toolkit.fluxcd.io/v1"
	helmAPIVersion   = "helm.toolkit.fluxcd.io/v2"
	// provider is the prefix of copied Secrets (`sp-kro-…`).
	provider = "kro"
)

// object is a manifest under construction.
type object = map[string]any

// chartPullSecretCopyName is the name of the chart pull secret's copy in
// the tenant namespace, prefixed so that it cannot collide with another
// provider's copy of a same-named Secret.
func chartPullSecretCopyName(source string) string {
	return names.PrefixedCopyName(provider, source)
}

// secretCopies: the chart pull secret into the tenant namespace, and every
// imagePullSecrets entry into kro-system on the ControlPlane under its own
// name (the chart refers to it by that name).
func secretCopies(v *kroVersion, imagePullSecrets []string, tenant string) []sp.ObjectCopy {
	copies := []sp.ObjectCopy{}
	if source := chartPullSecret(v); source != "" {
		copies = append(copies, sp.CopySecret(source, dockerConfigJSON, sp.ClusterPlatform, tenant,
			chartPullSecretCopyName(source)))
	}
	for _, source := range imagePullSecrets {
		copies = append(copies, sp.CopySecret(source, dockerConfigJSON, sp.ClusterControlPlane, kroSystem, source))
	}
	return copies
}

// ociRepositoryObject is the Flux OCIRepository that pulls the chart.
func ociRepositoryObject(v *kroVersion, tenant string) object {
	spec := object{
		"interval": fluxInterval,
		"url":      chartURL(v),
		"ref":      object{"tag": v.ChartVersion},
	}
	if source := chartPullSecret(v); source != "" {
		spec["secretRef"] = object{"name": chartPullSecretCopyName(source)}
	}
	return object{
		"apiVersion": sourceAPIVersion,
		"kind":       "OCIRepository",
		"metadata":   object{"name": ociRepository, "namespace": tenant},
		"spec":       spec,
	}
}

// helmReleaseObject is the Flux HelmRelease that installs kro into
// kro-system on the ControlPlane, through the kubeconfig Secret of the
// granted AccessRequest.
func helmReleaseObject(v *kroVersion, tenant string, kubeconfig *sp.KubeconfigRef) object {
	spec := object{
		"releaseName":      releaseName,
		"interval":         fluxInterval,
		"targetNamespace":  kroSystem,
		"storageNamespace": kroSystem,
		"install": object{
			"crds":            "Create",
			"createNamespace": true,
			"remediation":     object{"retries": 3},
		},
		"upgrade": object{
			"crds":          "CreateReplace",
			"cleanupOnFail": true,
			"remediation":   object{"retries": 3, "strategy": "rollback"},
		},
		"chartRef": object{"kind": "OCIRepository", "name": ociRepository, "namespace": tenant},
		"kubeConfig": object{
			"secretRef": object{"name": kubeconfig.Name, "key": kubeconfig.Key},
		},
	}
	if v.HelmValues != nil {
		spec["values"] = v.HelmValues
	}
	return object{
		"apiVersion": helmAPIVersion,
		"kind":       "HelmRelease",
		"metadata":   object{"name": helmRelease, "namespace": tenant},
		"spec":       spec,
	}
}

// kroSystemNamespace is needed before image pull secrets can be copied
// there (the HelmRelease would create it only later).
func kroSystemNamespace() object {
	return object{"apiVersion": "v1", "kind": "Namespace", "metadata": object{"name": kroSystem}}
}

// manifest is o as JSON text; o holds only JSON values, so this cannot
// fail.
func manifest(o object) string {
	text, err := json.Marshal(o)
	if err != nil {
		panic("a manifest that is not JSON: " + err.Error())
	}
	return string(text)
}

// asRead is o as the host reads it back, through JSON: the form observed
// objects are compared with.
func asRead(o object) any {
	value, _ := decode(manifest(o))
	return value
}

// desiredObjects are all objects to apply, in apply order.
func desiredObjects(v *kroVersion, needsKroSystem bool, tenant string, kubeconfig *sp.KubeconfigRef) []sp.DesiredObject {
	objects := make([]sp.DesiredObject, 0, 3)
	if needsKroSystem {
		objects = append(objects, sp.DesiredObject{Cluster: sp.ClusterControlPlane, Manifest: manifest(kroSystemNamespace())})
	}
	return append(objects,
		sp.DesiredObject{Cluster: sp.ClusterPlatform, Manifest: manifest(ociRepositoryObject(v, tenant))},
		sp.DesiredObject{Cluster: sp.ClusterPlatform, Manifest: manifest(helmReleaseObject(v, tenant, kubeconfig))},
	)
}
