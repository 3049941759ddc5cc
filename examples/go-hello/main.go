// Command go-hello is the smallest useful plugin in Go: for every Hello
// object a tenant creates, a ConfigMap with its greeting in the tenant's
// namespace on the platform cluster. The Go SDK is described in
// docs/plugin-guide.md; examples/ts-hello is this plugin in TypeScript, and
// the host's tests load both as components.
package main

import (
	"encoding/json"
	"fmt"

	sp "open-control-plane.io/service-provider-host/sdk-go"
)

const group = "hello.services.open-control-plane.io"

var configMaps = sp.APIKind{Version: "v1", Kind: "ConfigMap", Plural: "configmaps", Namespaced: true}

type hello struct{}

func (hello) Describe() sp.Descriptor {
	return sp.Descriptor{
		Name:           "hello",
		Service:        sp.APIKind{Group: group, Version: "v1alpha1", Kind: "Hello", Plural: "hellos", Namespaced: true},
		ProviderConfig: sp.APIKind{Group: group, Version: "v1alpha1", Kind: "ProviderConfig", Plural: "providerconfigs"},
		Finalizer:      group + "/finalizer",
		Capabilities: []sp.Capability{
			{Cluster: sp.ClusterPlatform, API: configMaps, Scope: sp.Tenant(), Names: []string{"hello"}},
		},
	}
}

// service is the part of a Hello object the plugin reads.
type service struct {
	Spec struct {
		Greeting string `json:"greeting"`
	} `json:"spec"`
}

func (hello) Plan(in sp.Input) (sp.Plan, error) {
	var s service
	if err := json.Unmarshal([]byte(in.Object), &s); err != nil {
		return sp.Plan{}, sp.InvalidInput(0, "the Hello object is not valid JSON: %v", err)
	}
	if s.Spec.Greeting == "" {
		return sp.Plan{}, sp.InvalidInput(0, "spec.greeting is empty")
	}
	manifest, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "hello", "namespace": in.Context.TenantNamespace},
		"data":     map[string]string{"greeting": s.Spec.Greeting},
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
				{Type: "Ready", Status: sp.ConditionTrue, Reason: "Greeted", Message: s.Spec.Greeting},
			},
		},
	}, nil
}

func (hello) Cleanup(in sp.Input) (sp.CleanupPlan, error) {
	namespace := in.Context.TenantNamespace
	return sp.TearDown(sp.Teardown{
		Objects: []sp.ObjectRef{{
			Cluster: sp.ClusterPlatform, APIVersion: "v1", Kind: "ConfigMap", Plural: "configmaps",
			Namespace: &namespace, Name: "hello",
		}},
		Copies: []sp.ObjectRef{},
	}), nil
}

func init() { sp.Export(hello{}) }

func main() {}
