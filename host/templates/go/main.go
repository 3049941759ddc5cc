// Command __NAME__ is a plugin for the OpenControlPlane service-provider
// host: for every __KIND__ a tenant creates, a ConfigMap with its greeting
// in the tenant's namespace on the platform cluster.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

const group = "__GROUP__"

// configMap is the one object each instance gets.
const configMap = "__NAME__"

var (
	//go:embed crds/__PLURAL__.__GROUP__.yaml
	serviceCRD string
	//go:embed crds/providerconfigs.__GROUP__.yaml
	providerConfigCRD string
)

var configMaps = sp.APIKind{Version: "v1", Kind: "ConfigMap", Plural: "configmaps", Namespaced: true}

type plugin struct{}

func (plugin) Describe() sp.Descriptor {
	return sp.Descriptor{
		Name:           "__NAME__",
		Service:        sp.APIKind{Group: group, Version: "v1alpha1", Kind: "__KIND__", Plural: "__PLURAL__", Namespaced: true},
		ProviderConfig: sp.APIKind{Group: group, Version: "v1alpha1", Kind: "ProviderConfig", Plural: "providerconfigs"},
		Finalizer:      group + "/finalizer",
		CRDs: []sp.CRD{
			{Cluster: sp.ClusterOnboarding, Manifest: serviceCRD},
			{Cluster: sp.ClusterPlatform, Manifest: providerConfigCRD},
		},
		Capabilities: []sp.Capability{
			{Cluster: sp.ClusterPlatform, API: configMaps, Scope: sp.Tenant(), Names: []string{configMap}},
		},
	}
}

// service is the part of a __KIND__ the plugin reads.
type service struct {
	Spec struct {
		Greeting string `json:"greeting"`
	} `json:"spec"`
}

func (plugin) Plan(in sp.Input) (sp.Plan, error) {
	var s service
	if err := json.Unmarshal([]byte(in.Object), &s); err != nil {
		return sp.Plan{}, sp.InvalidInput(0, "the __KIND__ is not valid: %v", err)
	}
	greeting := strings.TrimSpace(s.Spec.Greeting)
	if greeting == "" {
		return sp.Plan{}, sp.InvalidInput(0, "spec.greeting is empty")
	}
	manifest, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": configMap, "namespace": in.Context.TenantNamespace},
		"data":     map[string]string{"greeting": greeting},
	})
	if err != nil {
		return sp.Plan{}, fmt.Errorf("writing the ConfigMap: %w", err)
	}
	return sp.Plan{
		Objects: []sp.DesiredObject{{Cluster: sp.ClusterPlatform, Manifest: string(manifest)}},
		Copies:  []sp.ObjectCopy{},
		Status: sp.ServiceStatus{
			Phase: "Ready",
			Conditions: []sp.Condition{
				{Type: "Ready", Status: sp.ConditionTrue, Reason: "Greeted", Message: greeting},
			},
		},
		RequeueAfterSeconds: 300,
	}, nil
}

func (plugin) Cleanup(in sp.Input) (sp.CleanupPlan, error) {
	namespace := in.Context.TenantNamespace
	return sp.TearDown(sp.Teardown{
		Objects: []sp.ObjectRef{{
			Cluster: sp.ClusterPlatform, APIVersion: "v1", Kind: "ConfigMap", Plural: "configmaps",
			Namespace: &namespace, Name: configMap,
		}},
		Copies: []sp.ObjectRef{},
	}), nil
}

func init() { sp.Export(plugin{}) }

func main() {}
