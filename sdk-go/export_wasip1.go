//go:build wasip1

package serviceprovider

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	export "open-control-plane.io/service-provider-host/sdk-go/internal/bindings/exports/export_open_control_plane_service_provider_provider"
	_ "open-control-plane.io/service-provider-host/sdk-go/internal/bindings/exports/wit_exports"
	wt "open-control-plane.io/service-provider-host/sdk-go/internal/bindings/imports/open_control_plane_service_provider_types"
)

// Export makes p the component's implementation. Call it from an init
// function of package main: the host instantiates the component (which runs
// the Go runtime's initialisation, init functions included) before every
// call.
func Export(p Provider) { export.Install(component{p}) }

// component converts between the SDK's types and the bindings'.
type component struct{ p Provider }

func (c component) Describe() wt.Descriptor { return toDescriptor(c.p.Describe()) }

func (c component) Plan(in wt.Input) witTypes.Result[wt.ReconcilePlan, wt.PlanError] {
	plan, err := c.p.Plan(fromInput(in))
	if err != nil {
		return witTypes.Err[wt.ReconcilePlan](toPlanError(err))
	}
	return witTypes.Ok[wt.ReconcilePlan, wt.PlanError](toPlan(plan))
}

func (c component) Cleanup(in wt.Input) witTypes.Result[wt.CleanupPlan, wt.PlanError] {
	plan, err := c.p.Cleanup(fromInput(in))
	if err != nil {
		return witTypes.Err[wt.CleanupPlan](toPlanError(err))
	}
	if b, ok := plan.Blocked(); ok {
		return witTypes.Ok[wt.CleanupPlan, wt.PlanError](wt.MakeCleanupPlanBlocked(wt.Blocked{
			Message:             b.Message,
			RequeueAfterSeconds: b.RequeueAfterSeconds,
			Resources:           toResources(b.Resources),
		}))
	}
	t, _ := plan.Teardown()
	return witTypes.Ok[wt.CleanupPlan, wt.PlanError](wt.MakeCleanupPlanTeardown(wt.Teardown{
		Objects:   mapSlice(t.Objects, toObjectRef),
		Copies:    mapSlice(t.Copies, toObjectRef),
		Resources: toResources(t.Resources),
	}))
}

func mapSlice[A, B any](items []A, f func(A) B) []B {
	out := make([]B, 0, len(items))
	for _, item := range items {
		out = append(out, f(item))
	}
	return out
}

func option[T, U any](value *T, f func(T) U) witTypes.Option[U] {
	if value == nil {
		return witTypes.None[U]()
	}
	return witTypes.Some(f(*value))
}

func same[T any](v T) T { return v }

func fromOption[T, U any](value witTypes.Option[T], f func(T) U) *U {
	if value.IsNone() {
		return nil
	}
	converted := f(value.Some())
	return &converted
}

// The enums: the SDK's string constants and the bindings' numbers.
var (
	clusters = map[Cluster]wt.Cluster{
		ClusterPlatform:     wt.Cluster_Platform,
		ClusterOnboarding:   wt.Cluster_Onboarding,
		ClusterControlPlane: wt.Cluster_ControlPlane,
		ClusterWorkload:     wt.Cluster_Workload,
	}
	stages            = map[Stage]wt.Stage{StageReconcile: wt.Stage_Reconcile, StageCleanup: wt.Stage_Cleanup, StageAlways: wt.Stage_Always}
	details           = map[Detail]wt.Detail{DetailFull: wt.Detail_Full, DetailMetadata: wt.Detail_Metadata}
	conditionStatuses = map[ConditionStatus]wt.ConditionStatus{
		ConditionTrue: wt.ConditionStatus_True, ConditionFalse: wt.ConditionStatus_False, ConditionUnknown: wt.ConditionStatus_Unknown,
	}
)

// enum converts one of the SDK's enum values. It panics on a value that is
// none of the constants (a plugin bug), which the host reports as the
// plugin's failure.
func enum[K ~string, V any](table map[K]V, value K, what string) V {
	converted, ok := table[value]
	if !ok {
		panic("serviceprovider: unknown " + what + " " + string(value))
	}
	return converted
}

func toCluster(c Cluster) wt.Cluster { return enum(clusters, c, "cluster") }

func toAPIKind(k APIKind) wt.ApiKind {
	return wt.ApiKind{Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.Plural, Namespaced: k.Namespaced}
}

func toRule(r PolicyRule) wt.PolicyRule {
	return wt.PolicyRule{
		ApiGroups:     nonNil(r.APIGroups),
		Resources:     nonNil(r.Resources),
		ResourceNames: nonNil(r.ResourceNames),
		Verbs:         nonNil(r.Verbs),
	}
}

func nonNil(items []string) []string {
	if items == nil {
		return []string{}
	}
	return items
}

func toScope(s NamespaceScope) wt.NamespaceScope {
	switch s.kind {
	case scopeNamed:
		return wt.MakeNamespaceScopeNamed(s.name)
	case scopeClusterScoped:
		return wt.MakeNamespaceScopeClusterScoped()
	case scopeAny:
		return wt.MakeNamespaceScopeAny()
	default:
		return wt.MakeNamespaceScopeTenant()
	}
}

func toDescriptor(d Descriptor) wt.Descriptor {
	return wt.Descriptor{
		Name:           d.Name,
		Service:        toAPIKind(d.Service),
		ProviderConfig: toAPIKind(d.ProviderConfig),
		Finalizer:      d.Finalizer,
		Crds: mapSlice(d.CRDs, func(c CRD) wt.Crd {
			return wt.Crd{Cluster: toCluster(c.Cluster), Manifest: c.Manifest}
		}),
		Access: wt.Access{
			ControlPlaneRules: mapSlice(d.Access.ControlPlaneRules, toRule),
			WorkloadCluster:   d.Access.WorkloadCluster,
			WorkloadRules:     mapSlice(d.Access.WorkloadRules, toRule),
		},
		Capabilities: mapSlice(d.Capabilities, func(c Capability) wt.Capability {
			return wt.Capability{Cluster: toCluster(c.Cluster), Api: toAPIKind(c.API), Scope: toScope(c.Scope), Names: nonNil(c.Names)}
		}),
		Observations: mapSlice(d.Observations, func(o Observation) wt.Observation {
			return wt.Observation{
				Id:      o.ID,
				Cluster: toCluster(o.Cluster),
				Api:     toAPIKind(o.API),
				Scope:   toScope(o.Scope),
				Name:    option(o.Name, same[string]),
				Stage:   enum(stages, o.Stage, "stage"),
				Detail:  enum(details, o.Detail, "detail"),
			}
		}),
	}
}

func fromKubeconfig(k wt.KubeconfigRef) KubeconfigRef {
	return KubeconfigRef{Namespace: k.Namespace, Name: k.Name, Key: k.Key}
}

func fromInput(in wt.Input) Input {
	return Input{
		Object:         in.Object,
		ProviderConfig: fromOption(in.ProviderConfig, same[string]),
		Context: Context{
			ProviderName:    in.Context.ProviderName,
			TenantNamespace: in.Context.TenantNamespace,
			PodNamespace:    in.Context.PodNamespace,
			ControlPlane:    fromOption(in.Context.ControlPlane, fromKubeconfig),
			Workload:        fromOption(in.Context.Workload, fromKubeconfig),
		},
		Observed: mapSlice(in.Observed, func(o wt.Observed) Observed { return Observed{ID: o.Id, Objects: o.Objects} }),
	}
}

func toCondition(c Condition) wt.Condition {
	status := enum(conditionStatuses, c.Status, "condition status")
	return wt.Condition{Type: c.Type, Status: status, Reason: c.Reason, Message: c.Message}
}

func toResource(r ResourceStatus) wt.ResourceStatus {
	return wt.ResourceStatus{
		ApiGroup:  option(r.APIGroup, same[string]),
		Kind:      r.Kind,
		Name:      r.Name,
		Namespace: option(r.Namespace, same[string]),
		Phase:     r.Phase,
		Message:   option(r.Message, same[string]),
		Location:  option(r.Location, same[string]),
	}
}

func toResources(resources []ResourceStatus) witTypes.Option[[]wt.ResourceStatus] {
	if resources == nil {
		return witTypes.None[[]wt.ResourceStatus]()
	}
	return witTypes.Some(mapSlice(resources, toResource))
}

func toCopy(c ObjectCopy) wt.ObjectCopy {
	kind := wt.MakeCopyKindConfigMap()
	if secretType, ok := c.Kind.SecretType(); ok {
		kind = wt.MakeCopyKindSecret(secretType)
	}
	return wt.ObjectCopy{
		Kind:            kind,
		SourceName:      c.SourceName,
		TargetCluster:   toCluster(c.TargetCluster),
		TargetNamespace: c.TargetNamespace,
		TargetName:      c.TargetName,
	}
}

func toPlan(p Plan) wt.ReconcilePlan {
	return wt.ReconcilePlan{
		Objects: mapSlice(p.Objects, func(o DesiredObject) wt.DesiredObject {
			return wt.DesiredObject{Cluster: toCluster(o.Cluster), Manifest: o.Manifest}
		}),
		Copies: mapSlice(p.Copies, toCopy),
		Status: wt.ServiceStatus{
			Phase:      p.Status.Phase,
			Conditions: mapSlice(p.Status.Conditions, toCondition),
			Resources:  toResources(p.Status.Resources),
		},
		RequeueAfterSeconds: p.RequeueAfterSeconds,
	}
}

func toObjectRef(r ObjectRef) wt.ObjectRef {
	return wt.ObjectRef{
		Cluster:    toCluster(r.Cluster),
		ApiVersion: r.APIVersion,
		Kind:       r.Kind,
		Plural:     r.Plural,
		Namespace:  option(r.Namespace, same[string]),
		Name:       r.Name,
	}
}

func toPlanError(err error) wt.PlanError {
	if invalid, ok := invalidInput(err); ok {
		return wt.MakePlanErrorInvalidInput(wt.InvalidInput{Message: invalid.Message, RequeueAfterSeconds: invalid.RequeueAfterSeconds})
	}
	return wt.MakePlanErrorTransient(err.Error())
}
